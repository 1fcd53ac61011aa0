// Copyright dlock authors. Conformance: fencing tokens (C8).
#include <memory>
#include <vector>

#include "conformance_fixture.h"

namespace dlock::test {
namespace {

TEST_P(Conformance, C8_TokensStrictlyIncreaseOverAlternatingClients) {
  constexpr int kAcquisitions = 1000;
  std::vector<std::unique_ptr<LockClient>> clients;
  std::vector<std::unique_ptr<DistributedLock>> locks;
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(auto client, NewClient());
    ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("fenced"));
    clients.push_back(std::move(client));
    locks.push_back(std::move(lock));
  }
  uint64_t last = 0;
  for (int i = 0; i < kAcquisitions; ++i) {
    DistributedLock& lock = *locks[i % 2];
    ASSERT_OK_AND_ASSIGN(Hold acquired, lock.TryAcquire(WithLease(kLongLease)));
    ASSERT_GT(acquired.fencing_token(), last) << "acquisition " << i;
    last = acquired.fencing_token();
    ASSERT_OK(acquired.Release());
  }
}

TEST_P(Conformance, C8_ReentryReturnsSameToken) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("re-entered"));
  std::vector<Hold> holds;
  ASSERT_OK_AND_ASSIGN(Hold first, lock->TryAcquire());
  const uint64_t first_token = first.fencing_token();
  ASSERT_EQ(first.state(), LockState::kHeld);
  holds.push_back(std::move(first));
  for (int i = 2; i <= 4; ++i) {
    ASSERT_OK_AND_ASSIGN(Hold again, lock->TryAcquire());
    EXPECT_EQ(again.hold_count(), i);
    EXPECT_EQ(again.fencing_token(), first_token);
    holds.push_back(std::move(again));
    // Every acquisition of the hold is still believed, with its token.
    for (const Hold& hold : holds) {
      ASSERT_EQ(hold.state(), LockState::kHeld);
      EXPECT_EQ(hold.fencing_token(), first_token);
    }
  }
  ASSERT_OK_AND_ASSIGN(LockInfo info, client->Admin().Inspect("re-entered"));
  EXPECT_EQ(info.fencing_token, first_token);
  for (int i = 3; i >= 0; --i) ASSERT_OK(holds[i].Release());

  // Fully released, the next hold is a fresh one.
  ASSERT_OK_AND_ASSIGN(Hold fresh, lock->TryAcquire());
  EXPECT_EQ(fresh.hold_count(), 1);
  EXPECT_GT(fresh.fencing_token(), first_token);
  EXPECT_OK(fresh.Release());
}

// Tokens keep growing however the previous hold ended: released, expired,
// or removed by force.
TEST_P(Conformance, C8_TokensIncreaseAfterExpiryAndForceUnlock) {
  ASSERT_OK_AND_ASSIGN(auto first_client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto second_client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto first, first_client->GetLock("forced"));
  ASSERT_OK_AND_ASSIGN(auto second, second_client->GetLock("forced"));

  // a is forced away and b expires: both are kept, never released.
  ASSERT_OK_AND_ASSIGN(Hold a, first->TryAcquire(WithLease(kLongLease)));
  ASSERT_OK(second_client->Admin().ForceUnlock("forced"));
  ASSERT_OK_AND_ASSIGN(Hold b,
                       second->TryAcquire(WithLease(absl::Milliseconds(200))));
  EXPECT_GT(b.fencing_token(), a.fencing_token());
  ASSERT_OK_AND_ASSIGN(Hold c, first->Acquire(WithLease(kLongLease, kNoHang)));
  EXPECT_GT(c.fencing_token(), b.fencing_token());
  EXPECT_OK(c.Release());
}

}  // namespace
}  // namespace dlock::test
