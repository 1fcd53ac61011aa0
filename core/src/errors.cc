#include "dlock/errors.h"

#include <array>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "dlock/duration.h"
#include "qualified_name.h"

namespace dlock {
namespace {

constexpr std::array<std::pair<ErrorKind, absl::string_view>, 11> kNames = {{
    {ErrorKind::kNotOwner, "not_owner"},
    {ErrorKind::kLost, "lost"},
    {ErrorKind::kClientClosed, "client_closed"},
    {ErrorKind::kHeldByAnother, "held_by_another"},
    {ErrorKind::kWaitExpired, "wait_expired"},
    {ErrorKind::kTokenMismatch, "token_mismatch"},
    {ErrorKind::kAcquisitionsStanding, "acquisitions_standing"},
    {ErrorKind::kWatchdogRenewed, "watchdog_renewed"},
    {ErrorKind::kLimitMismatch, "limit_mismatch"},
    {ErrorKind::kPermitsMismatch, "permits_mismatch"},
    {ErrorKind::kUpgradeRefused, "upgrade_refused"},
}};

using internal::ObjectPhrase;

bool IsSemaphore(absl::string_view key) {
  return internal::ShapeOf(key).kind == ObjectKind::kSemaphore;
}

absl::Status Marked(absl::StatusCode code, absl::string_view message,
                    ErrorKind kind) {
  absl::Status status(code, message);
  status.SetPayload(kErrorPayloadUrl, absl::Cord(ErrorKindName(kind)));
  return status;
}

}  // namespace

absl::string_view ErrorKindName(ErrorKind kind) {
  for (const auto& [k, name] : kNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

std::optional<ErrorKind> ErrorKindOf(const absl::Status& status) {
  if (status.ok()) return std::nullopt;
  absl::optional<absl::Cord> payload = status.GetPayload(kErrorPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  for (const auto& [kind, name] : kNames) {
    if (*payload == name) return kind;
  }
  return std::nullopt;
}

absl::Status TokenMismatchError(absl::string_view lock_name,
                                uint64_t fencing_token) {
  return Marked(absl::StatusCode::kFailedPrecondition,
                absl::StrCat(ObjectPhrase(lock_name),
                             " is not held with fencing token ", fencing_token,
                             " (released, expired or taken over since): left "
                             "as it is"),
                ErrorKind::kTokenMismatch);
}

absl::Status AcquisitionsStandingError(absl::string_view lock_name,
                                       int64_t others) {
  return Marked(
      absl::StatusCode::kFailedPrecondition,
      absl::StrCat(ObjectPhrase(lock_name), " has ", others,
                   " other acquisition(s) of this owner standing (re-entry or "
                   "KeepUntilLeaseEnd): release those first, then release "
                   "this one keeping the lock; nothing was changed"),
      ErrorKind::kAcquisitionsStanding);
}

absl::Status WatchdogRenewedError(absl::string_view lock_name) {
  return Marked(absl::StatusCode::kFailedPrecondition,
                absl::StrCat(ObjectPhrase(lock_name),
                             " is renewed by the watchdog and would never end "
                             "if kept: only a hold with an explicit lease can "
                             "be kept until its lease ends"),
                ErrorKind::kWatchdogRenewed);
}

absl::Status NotOwnerError(absl::string_view lock_name) {
  return Marked(absl::StatusCode::kFailedPrecondition,
                absl::StrCat(ObjectPhrase(lock_name),
                             " is not held by this owner (never acquired, "
                             "released, expired, force-unlocked or taken "
                             "over)"),
                ErrorKind::kNotOwner);
}

absl::Status LostError(absl::string_view lock_name, absl::string_view why) {
  return Marked(absl::StatusCode::kFailedPrecondition,
                absl::StrCat(ObjectPhrase(lock_name), " was lost: ", why),
                ErrorKind::kLost);
}

absl::Status ClientClosedError(absl::string_view endpoint) {
  return Marked(absl::StatusCode::kFailedPrecondition,
                absl::StrCat("the client of ", endpoint, " is closed"),
                ErrorKind::kClientClosed);
}

absl::Status HeldByAnotherError(absl::string_view lock_name) {
  return Marked(
      absl::StatusCode::kDeadlineExceeded,
      absl::StrCat(ObjectPhrase(lock_name), IsSemaphore(lock_name)
                                                ? " has too few permits free"
                                                : " is held by another owner"),
      ErrorKind::kHeldByAnother);
}

absl::Status WaitCancelledError(absl::string_view lock_name) {
  return absl::CancelledError(
      absl::StrCat("wait for ", ObjectPhrase(lock_name), " was cancelled"));
}

absl::Status WaitExpiredError(absl::string_view lock_name,
                              absl::Duration waited) {
  return Marked(absl::StatusCode::kDeadlineExceeded,
                absl::StrCat(ObjectPhrase(lock_name), " not acquired within ",
                             FormatDurationForPeople(waited),
                             IsSemaphore(lock_name)
                                 ? ": other owners still hold its permits"
                                 : ": another owner still holds it"),
                ErrorKind::kWaitExpired);
}

absl::Status LimitMismatchError(absl::string_view name, int64_t in_force,
                                int64_t asked) {
  return Marked(
      absl::StatusCode::kFailedPrecondition,
      absl::StrCat("semaphore '", name, "' has N=", in_force,
                   " in force (its holders' and waiters'), not the N=", asked,
                   " asked: give every client the same N, or wait until "
                   "nothing holds it; nothing was taken"),
      ErrorKind::kLimitMismatch);
}

absl::Status PermitsMismatchError(absl::string_view name, int64_t held,
                                  int64_t asked) {
  return Marked(
      absl::StatusCode::kFailedPrecondition,
      absl::StrCat("semaphore '", name, "': this owner's grant holds ", held,
                   " permit(s), and acquiring again re-enters it, so it "
                   "cannot take ",
                   asked,
                   ": ask the same number, or use another owner token; "
                   "nothing changed"),
      ErrorKind::kPermitsMismatch);
}

absl::Status UpgradeRefusedError(absl::string_view name) {
  return Marked(
      absl::StatusCode::kFailedPrecondition,
      absl::StrCat("lock '", name,
                   "' is read by this owner, which asked to write it: "
                   "refused, since two readers upgrading would wait for each "
                   "other forever; release the read lock, then acquire the "
                   "write lock"),
      ErrorKind::kUpgradeRefused);
}

absl::Status WithKind(absl::Status status, ErrorKind kind) {
  if (status.ok()) return status;
  status.SetPayload(kErrorPayloadUrl, absl::Cord(ErrorKindName(kind)));
  return status;
}

absl::Status WithContext(const absl::Status& status,
                         absl::string_view context) {
  if (status.ok() || context.empty()) return status;
  absl::Status annotated(status.code(),
                         absl::StrCat(status.message(), "; ", context));
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    annotated.SetPayload(url, payload);
  });
  return annotated;
}

}  // namespace dlock
