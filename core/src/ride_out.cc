#include "dlock/ride_out.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "dlock/errors.h"
#include "qualified_name.h"

namespace dlock {

bool PauseUnlessCancelled(const Clock& clock, MonoTime until,
                          const CancelToken& cancel) {
  std::mutex mu;
  std::condition_variable cv;
  // Notified under `mu`, so that the check in WaitUntil cannot miss it.
  ScopedCancelCallback on_cancel(cancel, [&] {
    std::lock_guard<std::mutex> lock(mu);
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  return !clock.WaitUntil(cv, lock, until,
                          [&] { return cancel.IsCancelled(); });
}

bool RideOut::Again(const absl::Status& failed) {
  if (!IsTransient(failed)) return false;
  const MonoTime now = clock_.Now();
  if (now >= deadline_) return false;
  // The last look comes at the deadline: one attempt, no wait (C10).
  if (!PauseUnlessCancelled(clock_, std::min(deadline_, now + backoff_.Next()),
                            cancel_)) {
    cancelled_ = true;
    return false;
  }
  ++attempts_;
  return true;
}

absl::Status RideOut::Final(const absl::Status& failed) const {
  if (cancelled_) {
    return WaitCancelledError(name_);
  }
  // A try (no wait) says what its one attempt met, as it is.
  if (!IsTransient(failed) || deadline_ <= started_) return failed;
  return absl::UnavailableError(absl::StrCat(
      internal::ObjectPhrase(name_),
      " not acquired: the backend stayed unavailable for the whole wait (",
      attempts_, attempts_ == 1 ? " attempt in " : " attempts in ",
      absl::FormatDuration(
          absl::Trunc(clock_.Now() - started_, absl::Milliseconds(1))),
      "); the last error: ", failed.message()));
}

}  // namespace dlock
