// Copyright dlock authors. What every conformance test shares: the
// parameterized fixture `Conformance` (one namespace per test, documented
// deviations), the suite's timing bounds, and helpers for
// lost notifications and for waiters on threads of their own.
//
// Each suite_<theme>.cc holds the TEST_P cases of a few clauses; each case is
// named after the clause it checks (C1..C21, docs/contract.md).
// backends.cc instantiates the suite with the test registry's entries
// (integration/test_servers.h) of one backend.
#ifndef DLOCK_TESTS_CONFORMANCE_CONFORMANCE_FIXTURE_H_
#define DLOCK_TESTS_CONFORMANCE_CONFORMANCE_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "status_testing.h"
#include "test_servers.h"

namespace dlock {

// Prints LockState by name in test failures.
inline void PrintTo(LockState state, std::ostream* os) {
  switch (state) {
    case LockState::kNotHeld:
      *os << "kNotHeld";
      return;
    case LockState::kHeld:
      *os << "kHeld";
      return;
    case LockState::kLost:
      *os << "kLost";
      return;
  }
  *os << "LockState(" << static_cast<int>(state) << ")";
}

}  // namespace dlock

namespace dlock::test {

// ---------------------------------------------------------------------------
// Timing. Bounds are generous, for a loaded 2-core machine: they catch hangs
// and a poll where a wake-up was due, never a slow scheduler.

// A fallback poll far longer than any wake-up may take: a waiter that gets
// the lock much sooner than this was woken, not polled (C9).
inline constexpr absl::Duration kSlowFallbackPoll = absl::Seconds(5);
// Something due within a few round trips (a hand-off, a try, a cancel).
inline constexpr absl::Duration kPromptly = absl::Seconds(1);
// Something that must only end rather than hang (fail-fast errors while a
// server is down, shutdown, reconnecting).
inline constexpr absl::Duration kNoHang = absl::Seconds(10);
// A watchdog lease renewed every ~270ms, so that lost holds surface quickly,
// with room for a scheduler hiccup between renewals.
inline constexpr absl::Duration kShortWatchdogLease = absl::Milliseconds(800);
// A lease that never runs out within a test.
inline constexpr absl::Duration kLongLease = absl::Seconds(60);
// How long a test lets a waiter thread reach its blocking wait.
inline constexpr absl::Duration kLetWaiterBlock = absl::Milliseconds(300);

// Polls `condition` every 10ms until it holds or `timeout` passes.
bool Eventually(absl::FunctionRef<bool()> condition, absl::Duration timeout);

// AcquireOptions with an explicit lease (no watchdog) and an optional wait.
AcquireOptions WithLease(absl::Duration lease,
                         absl::Duration wait = absl::ZeroDuration());
// AcquireOptions acting for an explicit owner token (C6).
AcquireOptions AsOwner(std::string owner_token,
                       absl::Duration lease = kLongLease);

// The fencing token the lock-holder helper (lock_holder_main.cc) prints as
// "HELD <token>" into `log` once it holds, waited for up to kNoHang.
absl::StatusOr<uint64_t> HeldToken(const std::string& log);

// Cancels `cancel` after `after`, on a thread of its own (join it): a wait
// that must be ended from outside while it blocks.
std::thread CancelAfter(CancelToken cancel, absl::Duration after);

// Where the lock-holder helper (lock_holder_main.cc) is: DLOCK_LOCK_HOLDER
// (set by ctest), else next to this test binary (both are built into the
// same directory).
std::string LockHolderPath();

// Names listed by client.Admin().List(prefix); nullopt, with a note in the
// test log, when the backend cannot list (Unimplemented is allowed by
// client.h).
absl::StatusOr<std::optional<std::set<std::string>>> ListedNames(
    LockClient& client, absl::string_view prefix = {});

// ---------------------------------------------------------------------------
// Records lost notifications (C7); copies share the record, so a callback
// given to a client may outlive the recorder.
class LostRecorder {
 public:
  LostRecorder();
  LockLostCallback Callback() const;
  // Whether at least `count` events arrived within `timeout`.
  bool WaitForEvents(size_t count, absl::Duration timeout) const;
  std::vector<LockLostEvent> Events() const;

 private:
  struct Record {
    absl::Mutex mu;
    std::vector<LockLostEvent> events ABSL_GUARDED_BY(mu);
  };
  std::shared_ptr<Record> record_;
};

// Lets the client's threads deliver anything still due, then reports how
// many notices `lost` got in all.
size_t SettledEvents(const LostRecorder& lost);

// What a successful Acquire() handed back, kept after its Hold was released.
struct Granted {
  uint64_t fencing_token = 0;
  int64_t hold_count = 0;
};

// An Acquire() on a thread of its own, for a waiter the test watches from the
// outside (C9, C12, C13, C17). The thread releases the Hold it got at once,
// so that it leaves nothing behind; tests look at what it got and when. The
// destructor cancels the wait and joins.
class BackgroundAcquire {
 public:
  BackgroundAcquire(DistributedLock& lock, AcquireOptions options);
  ~BackgroundAcquire();
  BackgroundAcquire(const BackgroundAcquire&) = delete;
  BackgroundAcquire& operator=(const BackgroundAcquire&) = delete;

  // Whether Acquire() returned within `timeout`.
  bool WaitDone(absl::Duration timeout);
  bool done();
  // What Acquire() returned, and when; valid once done.
  absl::StatusOr<Granted> result();
  absl::Time done_at();
  // The Hold's Release() that followed a successful acquire.
  absl::Status release_status();

 private:
  CancelToken cancel_;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::StatusOr<Granted> result_ ABSL_GUARDED_BY(mu_);
  absl::Status release_status_ ABSL_GUARDED_BY(mu_);
  absl::Time done_at_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// ---------------------------------------------------------------------------
// The parameterized suite. Every test gets a namespace of its own (from its
// name and a random suffix), so tests never see each other's locks even on a
// shared server.
class Conformance : public ::testing::TestWithParam<TestBackend> {
 protected:
  // Skips a case the backend lists as a documented deviation, and only such
  // a case.
  void SetUp() override;

  const TestBackend& backend() const { return GetParam(); }
  const std::string& ns() const { return ns_; }
  // Another namespace of this test's own: this test's namespace plus
  // ".<tag>", which also probes key encodings for collisions (C16).
  std::string OtherNamespace(absl::string_view tag) const;

  // A URI of the backend for a client in `lock_namespace`; if its server
  // does not start, the case fails saying what is missing (UriForTest).
  std::string UriIn(const std::string& lock_namespace) const;
  absl::StatusOr<std::unique_ptr<LockClient>> NewClient(
      ClientOptions options = {}) const;
  absl::StatusOr<std::unique_ptr<LockClient>> NewClientIn(
      const std::string& lock_namespace, ClientOptions options = {}) const;

  // The failure message for a test whose backend lacks `capability` without
  // listing the test as a deviation: a missing harness feature never passes.
  std::string MissingCapability(absl::string_view capability) const;

  // The current case's name without the backend suffix, as
  // `conformance_deviations` lists it
  // ("C18_ServerRestartReportsLostAndClientReconnects").
  static std::string CaseName();

 private:
  std::string ns_;
};

// Options whose waiters can only be woken, not polled, within a test (C9).
ClientOptions SlowPollOptions();

}  // namespace dlock::test

#endif  // DLOCK_TESTS_CONFORMANCE_CONFORMANCE_FIXTURE_H_
