// Copyright dlock authors. Riding out transient unavailability: a failover
// (a Redis master killed and its replica promoted, a ZooKeeper leader
// election, a PostgreSQL standby not yet promoted) makes the backend answer
// Unavailable for a few seconds. A caller who asked to wait for a lock
// expects the wait to cover that; a try, and every call on a hold, stay
// fail-fast (C18, docs/semantics.md "Riding out a failover"). The core's
// waiting acquire uses it; so does an adapter that retries a try of its own
// (the job guard's ride_out).
#ifndef DLOCK_RIDE_OUT_H_
#define DLOCK_RIDE_OUT_H_

#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/backoff.h"
#include "dlock/cancel.h"
#include "dlock/clock.h"

namespace dlock {

// Transient: the backend could not be reached or could not serve now, and
// may later (backend.h: Unavailable). A backend says "did not answer in
// time" as Unavailable too; DeadlineExceeded from Acquire means the lock
// stayed held, which is no fault to ride out.
inline bool IsTransient(const absl::Status& s) {
  return absl::IsUnavailable(s);
}

// Sleeps until `until` on `clock`; false, at once, when `cancel` fires.
bool PauseUnlessCancelled(const Clock& clock, MonoTime until,
                          const CancelToken& cancel);

// The retries of one waiting acquire (a try passes a deadline in the past,
// and gets one attempt, its error as it is): each step that fails transiently
// (settling a release still pending, the backend's Acquire up to the
// deadline) is tried again after a pause, until it answers anything else,
// `cancel` fires or `deadline` passes. The backend follows the new master or
// leader on each attempt. Used on one thread.
//
//   absl::StatusOr<Grant> grant;
//   do grant = attempt(); while (!grant.ok() && ride.Again(grant.status()));
//   if (!grant.ok()) return ride.Final(grant.status());
class RideOut {
 public:
  RideOut(const Clock& clock, absl::string_view name, MonoTime deadline,
          CancelToken cancel)
      : clock_(clock),
        name_(name),
        deadline_(deadline),
        cancel_(std::move(cancel)),
        started_(clock.Now()) {}

  // After a failed attempt: pauses and returns true when `failed` is
  // transient and the wait goes on; false to give up with Final(failed).
  bool Again(const absl::Status& failed);
  // What the caller returns for the attempt that failed last: as it is, or
  // Cancelled if the wait was cancelled in a pause, or once the wait ended
  // on transient failures, Unavailable naming the wait and the last error.
  absl::Status Final(const absl::Status& failed) const;

 private:
  const Clock& clock_;
  const absl::string_view name_;
  const MonoTime deadline_;
  const CancelToken cancel_;
  const MonoTime started_;
  RetryBackoff backoff_;
  int attempts_ = 1;
  bool cancelled_ = false;
};

}  // namespace dlock

#endif  // DLOCK_RIDE_OUT_H_
