// Copyright dlock authors. The contract's errors (C14), built in one place
// and marked with a payload, so that callers branch on what happened with
// dlock::IsLost(status) and friends instead of reading messages.
//
// Every error keeps the absl::StatusCode the contract gives it; the payload
// under kErrorPayloadUrl names the finer kind. Adding context to an error
// with WithContext() keeps both.
#ifndef DLOCK_ERRORS_H_
#define DLOCK_ERRORS_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dlock {

// The payload's type URL (absl::Status::GetPayload); its value is one of the
// kind names below, e.g. "lost".
inline constexpr absl::string_view kErrorPayloadUrl =
    "type.dlock.dev/dlock.ErrorKind";

enum class ErrorKind {
  // FailedPrecondition: the caller's owner does not hold the lock (never
  // did, released it already, or another owner holds it now) (C4).
  kNotOwner,
  // FailedPrecondition: the hold was believed and is gone: its lease ran
  // out, it was force-unlocked, or the backend could not be reached in time
  // (C12, C19). Told once through the lost callbacks (C20), whose
  // LockLostEvent::reason carries this kind with the cause's own code
  // (Unavailable: the backend could not be reached in time).
  kLost,
  // FailedPrecondition: the client was closed (C13).
  kClientClosed,
  // DeadlineExceeded: a try (zero wait) found the lock held by another
  // owner (C10).
  kHeldByAnother,
  // DeadlineExceeded: a wait ran out with the lock still held by another
  // owner (C14).
  kWaitExpired,
  // FailedPrecondition: a conditional force unlock (LockAdmin::
  // ForceUnlock(name, token)) found the lock free or held with another
  // token, and left it as it was.
  kTokenMismatch,
  // FailedPrecondition: Hold::ReleaseAndKeepFor() on an acquisition while
  // other acquisitions of its owner stand through this client (re-entry,
  // KeepUntilLeaseEnd); nothing changed.
  kAcquisitionsStanding,
  // FailedPrecondition: Hold::KeepUntilLeaseEnd() on a hold the watchdog
  // renews, which would never end; nothing changed.
  kWatchdogRenewed,
  // FailedPrecondition: a semaphore asked with another N than the one in
  // force (C22); nothing was taken.
  kLimitMismatch,
  // FailedPrecondition: a semaphore's re-entry (C5) asked other permits than
  // the owner's grant holds; nothing changed.
  kPermitsMismatch,
  // FailedPrecondition: the owner holds a lock's read lock and asked for its
  // write lock (C23): refused at once rather than waiting for itself.
  kUpgradeRefused,
};

// "not_owner", "lost", "client_closed", "held_by_another", "wait_expired",
// "token_mismatch", "acquisitions_standing", "watchdog_renewed",
// "limit_mismatch", "permits_mismatch", "upgrade_refused".
absl::string_view ErrorKindName(ErrorKind kind);

// The kind an error carries; nullopt for OK and for errors without one (a
// backend that cannot be reached, a bad argument: their codes say it).
std::optional<ErrorKind> ErrorKindOf(const absl::Status& status);

inline bool IsNotOwner(const absl::Status& s) {
  return ErrorKindOf(s) == ErrorKind::kNotOwner;
}
inline bool IsLost(const absl::Status& s) {
  return ErrorKindOf(s) == ErrorKind::kLost;
}
inline bool IsClientClosed(const absl::Status& s) {
  return ErrorKindOf(s) == ErrorKind::kClientClosed;
}
inline bool IsHeldByAnother(const absl::Status& s) {
  return ErrorKindOf(s) == ErrorKind::kHeldByAnother;
}
inline bool IsWaitExpired(const absl::Status& s) {
  return ErrorKindOf(s) == ErrorKind::kWaitExpired;
}
inline bool IsTokenMismatch(const absl::Status& s) {
  return ErrorKindOf(s) == ErrorKind::kTokenMismatch;
}
inline bool IsLimitMismatch(const absl::Status& s) {
  return ErrorKindOf(s) == ErrorKind::kLimitMismatch;
}
inline bool IsPermitsMismatch(const absl::Status& s) {
  return ErrorKindOf(s) == ErrorKind::kPermitsMismatch;
}
inline bool IsUpgradeRefused(const absl::Status& s) {
  return ErrorKindOf(s) == ErrorKind::kUpgradeRefused;
}

// Access refused, on every backend (and over TLS): the server, or the TLS
// handshake, did not accept who the client is (a wrong or missing
// password, an unknown user or role, a certificate either side rejects):
// Unauthenticated. It accepted who the client is but not what it asked (a
// command, key, table, database or node this identity may not use):
// PermissionDenied. Every backend gives its server's refusals these codes,
// and no other error: neither passes with time, so a wait does not retry
// them, and `dlock` exits 77 for both (docs/cli.md).
inline bool IsAccessRefused(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnauthenticated ||
         s.code() == absl::StatusCode::kPermissionDenied;
}

// The builders. `lock_name` is the name service code gave, never a
// backend's internal key, or the client core's key of a primitive's hold,
// which the message words as that object ("semaphore 'jobs'");
// `endpoint` is the redacted one.
absl::Status NotOwnerError(absl::string_view lock_name);
absl::Status LostError(absl::string_view lock_name, absl::string_view why);
absl::Status ClientClosedError(absl::string_view endpoint);
// From a conditional force unlock (LockAdmin::ForceUnlock(name, token)): the
// lock is free or held with another token, and was left as it was.
absl::Status TokenMismatchError(absl::string_view lock_name,
                                uint64_t fencing_token);
absl::Status HeldByAnotherError(absl::string_view lock_name);
// Hold::ReleaseAndKeepFor() refused: `others` acquisitions of the owner
// stand.
absl::Status AcquisitionsStandingError(absl::string_view lock_name,
                                       int64_t others);
// Hold::KeepUntilLeaseEnd() refused for a watchdog-renewed hold.
absl::Status WatchdogRenewedError(absl::string_view lock_name);
absl::Status WaitExpiredError(absl::string_view lock_name,
                              absl::Duration waited);
// A wait for the lock ended by the caller's CancelToken: Cancelled.
absl::Status WaitCancelledError(absl::string_view lock_name);
// Semaphore `name` was asked with another N than `in_force`, the N of its
// holders and waiters (C22).
absl::Status LimitMismatchError(absl::string_view name, int64_t in_force,
                                int64_t asked);
// A re-entry of semaphore `name` asked `asked` permits; the owner's grant
// holds `held` (C5, C22).
absl::Status PermitsMismatchError(absl::string_view name, int64_t held,
                                  int64_t asked);
// The owner reads lock `name` and asked to write it (C23).
absl::Status UpgradeRefusedError(absl::string_view name);

// `status` (not OK) marked as `kind`, code and message kept: for a cause
// that is also a loss, e.g. a LockLostEvent's reason.
absl::Status WithKind(absl::Status status, ErrorKind kind);

// `status` with `context` appended to its message ("message; context"),
// keeping its code and payloads.
absl::Status WithContext(const absl::Status& status, absl::string_view context);

}  // namespace dlock

#endif  // DLOCK_ERRORS_H_
