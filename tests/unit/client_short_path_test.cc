// LockClient::Acquire(name, options) and TryAcquire(name): the short path
// that needs no lock handle.
#include <memory>

#include "dlock/dlock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<LockClient> MustConnect(const std::string& uri) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
  EXPECT_OK(client);
  return client.ok() ? *std::move(client) : nullptr;
}

TEST(ClientShortPath, AcquireByNameHoldsUntilTheHoldIsReleased) {
  std::unique_ptr<LockClient> a = MustConnect("memory://short-path");
  std::unique_ptr<LockClient> b = MustConnect("memory://short-path");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  absl::StatusOr<Hold> held = a->Acquire("reports/nightly");
  ASSERT_OK(held);
  EXPECT_EQ(held->lock_name(), "reports/nightly");
  EXPECT_EQ(held->fencing_token(), 1u);
  // No handle is kept anywhere, and the lock is held all the same.
  EXPECT_TRUE(IsHeldByAnother(b->TryAcquire("reports/nightly").status()));
  EXPECT_TRUE(IsWaitExpired(
      b->Acquire("reports/nightly", {.wait = absl::Milliseconds(20)})
          .status()));
  EXPECT_TRUE(held->IsHeldOnBackend().value_or(false));
  ASSERT_OK(held->Release());
  absl::StatusOr<Hold> next = b->TryAcquire("reports/nightly");
  ASSERT_OK(next);
  EXPECT_EQ(next->fencing_token(), 2u);
}

TEST(ClientShortPath, ABadNameIsRefusedAsByGetLock) {
  std::unique_ptr<LockClient> client = MustConnect("memory://short-path-bad");
  ASSERT_NE(client, nullptr);
  absl::StatusOr<Hold> held = client->Acquire("");
  EXPECT_EQ(held.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(held.status().message(), client->GetLock("").status().message());
  EXPECT_EQ(client->TryAcquire("").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dlock
