// Copyright dlock authors. Status assertions for every test: EXPECT_OK,
// ASSERT_OK, EXPECT_CODE and ASSERT_OK_AND_ASSIGN, for absl::Status and
// absl::StatusOr alike. Each evaluates its argument once.
#ifndef DLOCK_INTEGRATION_STATUS_TESTING_H_
#define DLOCK_INTEGRATION_STATUS_TESTING_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace dlock::test {

inline const absl::Status& StatusOf(const absl::Status& status) {
  return status;
}
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

template <typename T>
::testing::AssertionResult IsOk(const char* text, const T& value) {
  const absl::Status& status = StatusOf(value);
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << text << " failed: " << status;
}

template <typename T>
::testing::AssertionResult HasCode(const char* text, const char* code_text,
                                   const T& value, absl::StatusCode code) {
  const absl::Status& status = StatusOf(value);
  if (status.code() == code) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << text << " should be " << code_text << " ("
         << absl::StatusCodeToString(code) << ") but is "
         << (status.ok() ? "OK" : status.ToString());
}

// Calls `f` (returning a Status or StatusOr) until it returns OK or `within`
// passes, every 50 ms; its last result.
template <typename F>
auto EventuallyOk(F f, absl::Duration within) -> decltype(f()) {
  const absl::Time deadline = absl::Now() + within;
  auto result = f();
  while (!result.ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
    result = f();
  }
  return result;
}

}  // namespace dlock::test

#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::dlock::test::IsOk, expr)
#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::dlock::test::IsOk, expr)
// EXPECT_CODE(lock->Release(), kFailedPrecondition)
#define EXPECT_CODE(expr, code) \
  EXPECT_PRED_FORMAT2(::dlock::test::HasCode, expr, absl::StatusCode::code)

// ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("x"));
#define ASSERT_OK_AND_ASSIGN(lhs, expr)                                     \
  DLOCK_ASSERT_OK_AND_ASSIGN_IMPL(DLOCK_CONCAT(dlock_status_or_, __LINE__), \
                                  lhs, expr)
#define DLOCK_CONCAT_INNER(a, b) a##b
#define DLOCK_CONCAT(a, b) DLOCK_CONCAT_INNER(a, b)
#define DLOCK_ASSERT_OK_AND_ASSIGN_IMPL(status_or, lhs, expr)                \
  auto status_or = (expr);                                                   \
  ASSERT_TRUE(status_or.ok()) << #expr << " failed: " << status_or.status(); \
  lhs = *std::move(status_or)

#endif  // DLOCK_INTEGRATION_STATUS_TESTING_H_
