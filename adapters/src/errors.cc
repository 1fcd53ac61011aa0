#include "dlock/adapters/errors.h"

#include <string>

#include "absl/strings/str_cat.h"

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

}  // namespace dlock
