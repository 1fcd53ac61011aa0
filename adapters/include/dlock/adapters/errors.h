// Copyright dlock authors. How the adapters report errors where a std
// interface cannot return a Status: lock() throws std::system_error, and an
// error while releasing (in unlock()) goes to the release-error hook of
// dlock/hold.h (ReleaseErrorHook, SetDefaultReleaseErrorHook,
// ReportReleaseError), the one a Hold's destructor reports to.
#ifndef DLOCK_ADAPTERS_ERRORS_H_
#define DLOCK_ADAPTERS_ERRORS_H_

#include <system_error>

#include "absl/status/status.h"
#include "dlock/hold.h"

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

}  // namespace dlock

#endif  // DLOCK_ADAPTERS_ERRORS_H_
