// Copyright dlock authors. memory:// behaviour the conformance suite does not
// look at: what its messages show.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "dlock/dlock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The instance keys its table by namespace, a NUL and the name; a message
// shows the lock's name as the caller gave it, never that key.
void ExpectNamesTheLockOnly(const absl::Status& status) {
  const std::string message(status.message());
  EXPECT_THAT(message, HasSubstr("'job'")) << status;
  EXPECT_EQ(message.find('\0'), std::string::npos) << status;
  EXPECT_THAT(message, Not(HasSubstr("team-a"))) << status;
}

TEST(MemoryBackend, MessagesNeverShowTheInternalKey) {
  absl::StatusOr<std::unique_ptr<LockClient>> holder =
      Connect("memory://key-leak?namespace=team-a");
  ASSERT_OK(holder);
  absl::StatusOr<std::unique_ptr<LockClient>> other =
      Connect("memory://key-leak?namespace=team-a");
  ASSERT_OK(other);
  std::unique_ptr<DistributedLock> held = *(*holder)->GetLock("job");
  absl::StatusOr<Hold> hold = held->TryAcquire();
  ASSERT_OK(hold);
  std::unique_ptr<DistributedLock> lock = *(*other)->GetLock("job");

  absl::StatusOr<Hold> tried = lock->TryAcquire();
  EXPECT_EQ(tried.status().code(), absl::StatusCode::kDeadlineExceeded);
  ExpectNamesTheLockOnly(tried.status());

  absl::StatusOr<Hold> waited = lock->Acquire({.wait = absl::Milliseconds(20)});
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kDeadlineExceeded);
  ExpectNamesTheLockOnly(waited.status());

  CancelToken cancel;
  cancel.Cancel();
  absl::StatusOr<Hold> cancelled =
      lock->Acquire({.wait = absl::Seconds(5), .cancel = cancel});
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled);
  ExpectNamesTheLockOnly(cancelled.status());

  // A release by a token that does not hold it.
  absl::Status release =
      (*holder)->OwnerTokens().Release("job", "not-the-owner");
  EXPECT_FALSE(release.ok());
  ExpectNamesTheLockOnly(release);
  EXPECT_OK(hold->Release());
}

}  // namespace
}  // namespace dlock
