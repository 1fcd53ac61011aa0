// Copyright dlock authors. How the adapters report errors where a std
// interface cannot return a Status: lock() throws std::system_error, and an
// error while releasing (in unlock() or a destructor) goes to a hook.
#ifndef DLOCK_ADAPTERS_ERRORS_H_
#define DLOCK_ADAPTERS_ERRORS_H_

#include <functional>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dlock {

// The category of error codes whose value is an absl::StatusCode. Its
// default_error_condition() maps onto std::errc where one fits, so callers
// can compare with std::errc::timed_out, std::errc::operation_canceled, etc.
const std::error_category& StatusCategory();

std::error_code MakeErrorCode(absl::StatusCode code);

// A std::system_error carrying `status`: code() in StatusCategory(), what()
// holding `context` and the status message.
std::system_error MakeSystemError(const absl::Status& status,
                                  const char* context);

// Called when releasing a lock fails where nobody can be returned a Status:
// DistributedMutex::unlock() and the destructors of the guards. Typical
// causes: the lock was lost (expired or force-unlocked) before release, or the
// backend was unreachable (the lock then expires with its lease).
using ReleaseErrorHook =
    std::function<void(absl::string_view lock_name, const absl::Status& error)>;

// The hook used where an adapter was given none. The default one writes one
// line to stderr. Passing an empty function restores it. Thread-safe.
void SetDefaultReleaseErrorHook(ReleaseErrorHook hook);

// Calls `hook`, or the default hook when `hook` is empty. Never throws: an
// exception from a hook is caught and written to stderr, since callers run in
// destructors and noexcept functions.
void ReportReleaseError(const ReleaseErrorHook& hook,
                        absl::string_view lock_name,
                        const absl::Status& error) noexcept;

}  // namespace dlock

#endif  // DLOCK_ADAPTERS_ERRORS_H_
