// Copyright dlock authors. What the conformance sections of issue 24's
// primitives share (suite_semaphore.cc, suite_rw.cc, suite_election.cc,
// suite_multi.cc): a backend whose traits do not offer a primitive is
// checked for saying so (Unimplemented with BackendTraits::primitives_note)
// instead of being skipped in silence.
#ifndef DLOCK_TESTS_CONFORMANCE_PRIMITIVES_FIXTURE_H_
#define DLOCK_TESTS_CONFORMANCE_PRIMITIVES_FIXTURE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "conformance_fixture.h"
#include "fault_backend.h"

namespace dlock::test {

enum class Primitive { kSemaphore, kReadWriteLock, kElection };

inline bool Declares(const BackendTraits& traits, Primitive primitive) {
  switch (primitive) {
    case Primitive::kSemaphore:
      return traits.semaphores;
    case Primitive::kReadWriteLock:
      return traits.read_write_locks;
    case Primitive::kElection:
      return traits.elections;
  }
  return false;
}

// What asking `client` for `primitive` answers.
inline absl::Status AskFor(LockClient& client, Primitive primitive) {
  switch (primitive) {
    case Primitive::kSemaphore:
      return client.GetSemaphore("asked", 2).status();
    case Primitive::kReadWriteLock:
      return client.GetReadWriteLock("asked").status();
    case Primitive::kElection:
      return client.GetElection("asked").status();
  }
  return absl::InternalError("no such primitive");
}

// Whether the backend of `client` offers `primitive`. When its traits say
// it does not, checks here that asking for it answers Unimplemented with
// the traits' note, and the case ends there.
inline bool Offered(LockClient& client, Primitive primitive) {
  const BackendTraits& traits = client.traits();
  const absl::Status asked = AskFor(client, primitive);
  if (Declares(traits, primitive)) {
    EXPECT_TRUE(asked.ok()) << "declared offered, but: " << asked;
    return asked.ok();
  }
  EXPECT_EQ(asked.code(), absl::StatusCode::kUnimplemented) << asked;
  EXPECT_FALSE(traits.primitives_note.empty())
      << "a primitive not offered needs a reason (primitives_note)";
  EXPECT_TRUE(absl::StrContains(asked.message(), traits.primitives_note))
      << asked;
  return false;
}

// A holder cut off from its backend, as behind a partition: once Cut(),
// its renewals and releases fail. It records when it was told of its loss,
// to compare with another's grant (C19, C20).
class CutOffHolder {
 public:
  // For the holder's client: a short watchdog lease, the faults.
  ClientOptions Options() const {
    ClientOptions options;
    options.watchdog_lease = kShortWatchdogLease;
    options.backend_decorator = faults_->Decorator();
    return options;
  }
  // For its acquisition: records the notice of a hold of `kind`.
  AcquireOptions Watched(ObjectKind kind) {
    AcquireOptions options;
    options.on_lost = [this, kind](const LockLostEvent& event) {
      EXPECT_EQ(event.kind, kind);
      absl::MutexLock lock(&mu_);
      told_ = absl::Now();
    };
    return options;
  }
  void Cut() {
    faults_->Set(FaultPlan::kRenew, {.fail_before = true});
    faults_->Set(FaultPlan::kRelease, {.fail_before = true});
  }
  ~CutOffHolder() {
    faults_->Clear(FaultPlan::kRenew);
    faults_->Clear(FaultPlan::kRelease);
  }
  // InfiniteFuture until told.
  absl::Time told() const {
    absl::MutexLock lock(&mu_);
    return told_;
  }

 private:
  const std::shared_ptr<FaultPlan> faults_ = std::make_shared<FaultPlan>();
  mutable absl::Mutex mu_;
  absl::Time told_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_CONFORMANCE_PRIMITIVES_FIXTURE_H_
