// Copyright dlock authors. Waiting without polling (C9), shared by backends
// whose acquire is one atomic attempt and whose releases are announced.
#ifndef DLOCK_BACKEND_WAKEUP_H_
#define DLOCK_BACKEND_WAKEUP_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dlock/backend/backend.h"
#include "dlock/clock.h"

namespace dlock {

// Local waiters by lock name. A backend's notification source (pub/sub,
// LISTEN, an in-process release) calls Notify(); waiters block in Wait().
class WakeupHub {
 public:
  class Waiter;

  // Waits count on `clock`, which must outlive the hub.
  explicit WakeupHub(const Clock& clock) : clock_(clock) {}
  WakeupHub(const WakeupHub&) = delete;
  WakeupHub& operator=(const WakeupHub&) = delete;

  // Who an announcement may wake. kOne: the backend knows that one caller
  // at most was refused while the released hold lasted, so the woken waiter
  // attempts at once. kSeveral, what a backend that cannot tell says: the
  // woken waiters attempt at random moments within a millisecond, so that
  // each race for the lock is a fair draw (core/src/wakeup.cc).
  enum class Waking { kSeveral, kOne };

  // Wakes the waiters registered for `name`.
  void Notify(absl::string_view name, Waking waking = Waking::kSeveral);
  // Wakes every waiter: after a reconnect, when announcements may be lost.
  void NotifyAll();

  const Clock& clock() const { return clock_; }

  // Counts Notify() and NotifyAll() calls. Read before an attempt and again
  // once a Waiter is registered: a difference means an announcement may
  // have come in between, which no Waiter saw.
  uint64_t notifications() const {
    return notifications_.load(std::memory_order_acquire);
  }

 private:
  friend class Waiter;
  struct Slot {
    explicit Slot(const Clock& clock) : changed(clock) {}
    int waiters = 0;
    uint64_t generation = 0;  // bumped by Notify(name)
    uint64_t raced = 0;       // the generation of the last kSeveral
    ClockCondVar changed;
  };
  const Clock& clock_;
  absl::Mutex mu_;
  absl::node_hash_map<std::string, Slot> slots_ ABSL_GUARDED_BY(mu_);
  uint64_t global_generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by NotifyAll
  std::atomic<uint64_t> notifications_{0};               // bumped under mu_
};

// Registers interest in one name for its lifetime. Register before the
// attempt that may fail, so that a release between the attempt and Wait()
// is not missed; or, as AcquireWithWakeups does, after it, looking again at
// once if notifications() moved since before the attempt.
class WakeupHub::Waiter {
 public:
  Waiter(WakeupHub& hub, absl::string_view name);
  ~Waiter();
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  // Blocks until a notification newer than the last one seen, `until` (on
  // the hub's clock), or cancellation. Returns true when notified.
  bool Wait(MonoTime until, const CancelToken& cancel);
  // After Wait() returned true: whether a notification it saw may have
  // woken several waiters (kSeveral, or NotifyAll).
  bool woken_for_a_race() const { return woken_for_a_race_; }

  absl::string_view name() const { return name_; }

 private:
  WakeupHub& hub_;
  std::string name_;
  WakeupHub::Slot* slot_;
  uint64_t seen_generation_ = 0;
  uint64_t seen_global_ = 0;
  bool woken_for_a_race_ = false;
};

// Backend::WatchObject for a backend whose announcements wake a WakeupHub:
// a waiter on the hub name of the object's announcements, registered when
// made (so before the caller reads the object).
class HubWatch : public ObjectWatch {
 public:
  HubWatch(WakeupHub& hub, absl::string_view name) : waiter_(hub, name) {}
  bool Wait(MonoTime until, const CancelToken& cancel) override {
    return waiter_.Wait(until, cancel);
  }

 private:
  WakeupHub::Waiter waiter_;
};

// One atomic attempt: the hold, or when another owner holds the lock, how
// long its lease has left (a hint for when to look again).
struct Attempt {
  std::optional<Acquired> acquired;
  absl::Duration holder_lease_left = absl::InfiniteDuration();
};

// Attempts, then sleeps until a wake-up, the holder's lease end, the fallback
// poll or the deadline, and attempts again; after a wake-up, at a random
// moment within 1 ms, so that fixed differences between the waiters (the
// order the server tells them in, their paths to it) do not decide every race
// for the lock. Returns the grant with the send
// time of the attempt that won. DeadlineExceeded or Cancelled when the wait
// ends without the lock; an attempt's error is returned as is.
absl::StatusOr<Grant> AcquireWithWakeups(
    const AcquireCall& call, WakeupHub& hub, absl::Duration fallback_poll,
    absl::FunctionRef<absl::StatusOr<Attempt>()> attempt);
// The same for an object whose releases are announced under another name
// than the caller's (a semaphore's or an election's marked name, a row, a
// message): sleeps on `wake_on`'s wake-ups.
absl::StatusOr<Grant> AcquireWithWakeups(
    const AcquireCall& call, absl::string_view wake_on, WakeupHub& hub,
    absl::Duration fallback_poll,
    absl::FunctionRef<absl::StatusOr<Attempt>()> attempt);

// One atomic attempt of a multi-lock (Backend::AcquireAll): every part
// taken, or which part another owner holds and the hint of its Attempt.
struct AllAttempt {
  std::vector<Acquired> acquired;  // one per part when all were taken
  size_t refused = 0;
  Attempt refusal;
};

// AcquireWithWakeups for a multi-lock's parts: nothing is held between
// attempts, and a refused attempt waits on the name that refused it, woken
// by its release (C9, C25). One Grant per part, each with the send time of
// the attempt that won.
absl::StatusOr<std::vector<Grant>> AcquireAllWithWakeups(
    absl::Span<const AcquireCall> parts, MonoTime deadline,
    const CancelToken& cancel, WakeupHub& hub, absl::Duration fallback_poll,
    absl::FunctionRef<absl::StatusOr<AllAttempt>()> attempt);

}  // namespace dlock

#endif  // DLOCK_BACKEND_WAKEUP_H_
