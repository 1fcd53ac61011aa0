// Copyright dlock authors. What the parts of a client core share: its
// options and clock, the backend, and the tables under one mutex. The parts
// (the facade that service code calls, the renewer, the notifier) each take
// the mutex to read or change the tables, and call the backend without it.
#ifndef DLOCK_CORE_SRC_CORE_STATE_H_
#define DLOCK_CORE_SRC_CORE_STATE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "alarms.h"
#include "dlock/backend/backend.h"
#include "dlock/client.h"
#include "dlock/clock.h"
#include "hold_table.h"
#include "observer_calls.h"
#include "pending_releases.h"
#include "wake_lateness.h"

namespace dlock::internal {

class CoreState {
 public:
  CoreState(ClientOptions options, std::string lock_namespace,
            std::string endpoint);
  CoreState(const CoreState&) = delete;
  CoreState& operator=(const CoreState&) = delete;

  const ClientOptions options;
  const std::shared_ptr<Clock> clock_owner;  // may be null: Clock::Real()
  const Clock& clock;
  const std::string lock_namespace;
  const std::string endpoint;  // redacted
  const ObserverCalls observer;
  // How late the notifier wakes (shared by the clients on Clock::Real()).
  const std::shared_ptr<WakeLateness> wake_lateness;
  // Set once, before any thread or call uses it (ClientCore::Start()).
  std::unique_ptr<Backend> backend;

  mutable absl::Mutex mu;
  bool closed ABSL_GUARDED_BY(mu) = false;
  Alarms alarms ABSL_GUARDED_BY(mu);
  PendingReleases pending ABSL_GUARDED_BY(mu);
  HoldTable holds ABSL_GUARDED_BY(mu);

  absl::Status ClosedError() const { return ClientClosedError(endpoint); }

  // Sends a release the backend had not confirmed, claimed from `pending`,
  // and settles it there: the one way such a release goes out, whoever
  // sends it (an acquisition of its key, the renewer's retries, Close()).
  // A confirmation in time spares its hold the loss notice (C20). `result`
  // gets the backend's answer. Until `ride_until` (Close() only), a
  // transient failure is tried again with backoff.
  PendingReleases::Settled SendRelease(
      const PendingReleases::Claim& claim, ReleaseFailureEvent::Stage stage,
      absl::Status* result, MonoTime ride_until = MonoTime::InfinitePast())
      ABSL_LOCKS_EXCLUDED(mu);

  // Close()'s release of `claim`: tried again with backoff while the
  // backend is transiently unavailable (a failover), until `until`.
  absl::StatusOr<int64_t> ReleaseRidingOut(const PendingReleases::Claim& claim,
                                           MonoTime until) const;

  // Tells the observer of a release that failed for a reason other than
  // the hold being gone.
  void TellReleaseFailure(const HoldKeyView& key,
                          ReleaseFailureEvent::Stage stage,
                          const absl::Status& error) const;
};

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_CORE_STATE_H_
