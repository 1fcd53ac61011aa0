#include "dlock/adapters/errors.h"

#include <cstdio>
#include <exception>
#include <string>
#include <utility>

#include "absl/base/const_init.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace dlock {
namespace {

class Category : public std::error_category {
 public:
  const char* name() const noexcept override { return "dlock"; }

  std::string message(int value) const override {
    return absl::StatusCodeToString(static_cast<absl::StatusCode>(value));
  }

  std::error_condition default_error_condition(
      int value) const noexcept override {
    switch (static_cast<absl::StatusCode>(value)) {
      case absl::StatusCode::kDeadlineExceeded:
        return std::errc::timed_out;
      case absl::StatusCode::kCancelled:
        return std::errc::operation_canceled;
      case absl::StatusCode::kInvalidArgument:
        return std::errc::invalid_argument;
      case absl::StatusCode::kFailedPrecondition:
        return std::errc::operation_not_permitted;
      case absl::StatusCode::kUnavailable:
        return std::errc::host_unreachable;
      case absl::StatusCode::kUnimplemented:
        return std::errc::function_not_supported;
      default:
        return std::error_condition(value, *this);
    }
  }
};

absl::Mutex hook_mu(absl::kConstInit);
ReleaseErrorHook* default_hook ABSL_GUARDED_BY(hook_mu) = nullptr;

void WriteToStderr(absl::string_view name, const absl::Status& error) {
  const std::string line = absl::StrCat("dlock: releasing lock '", name,
                                        "' failed: ", error.ToString(), "\n");
  std::fputs(line.c_str(), stderr);
}

}  // namespace

const std::error_category& StatusCategory() {
  static const Category* category = new Category;  // used during exit too
  return *category;
}

std::error_code MakeErrorCode(absl::StatusCode code) {
  return std::error_code(static_cast<int>(code), StatusCategory());
}

std::system_error MakeSystemError(const absl::Status& status,
                                  const char* context) {
  return std::system_error(MakeErrorCode(status.code()),
                           absl::StrCat(context, ": ", status.message()));
}

void SetDefaultReleaseErrorHook(ReleaseErrorHook hook) {
  auto* fresh = hook ? new ReleaseErrorHook(std::move(hook)) : nullptr;
  ReleaseErrorHook* old;
  {
    absl::MutexLock lock(&hook_mu);
    old = default_hook;
    default_hook = fresh;
  }
  // A concurrent ReportReleaseError() runs a copy, so this is safe to free.
  delete old;
}

void ReportReleaseError(const ReleaseErrorHook& hook,
                        absl::string_view lock_name,
                        const absl::Status& error) noexcept {
  try {
    if (hook) {
      hook(lock_name, error);
      return;
    }
    ReleaseErrorHook fallback;
    {
      absl::MutexLock lock(&hook_mu);
      if (default_hook != nullptr) fallback = *default_hook;
    }
    if (fallback) {
      fallback(lock_name, error);
    } else {
      WriteToStderr(lock_name, error);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock: a release-error hook threw: %s\n", e.what());
    WriteToStderr(lock_name, error);
  } catch (...) {
    std::fputs("dlock: a release-error hook threw\n", stderr);
    WriteToStderr(lock_name, error);
  }
}

}  // namespace dlock
