// Copyright dlock authors. The renewer: one thread per client, whatever the
// number of locks, that sends the watchdog's renewals (C7), the holder
// liveness heartbeat, and the retries of releases the backend did not
// confirm (C21). Each round collects what is due under the core's mutex,
// calls the backend without it, and applies the answers under it.
#ifndef DLOCK_CORE_SRC_RENEWER_H_
#define DLOCK_CORE_SRC_RENEWER_H_

#include "absl/base/thread_annotations.h"
#include "core_state.h"

namespace dlock::internal {

class Renewer {
 public:
  explicit Renewer(CoreState& state) : state_(state) {}

  // The thread's loop, until the client closes.
  void Run() ABSL_LOCKS_EXCLUDED(state_.mu);

 private:
  void Heartbeat(MonoTime now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);
  void RenewDue(MonoTime now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);
  void RetryReleases(MonoTime now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);
  // When something is due next.
  MonoTime NextWake() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);

  CoreState& state_;
};

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_RENEWER_H_
