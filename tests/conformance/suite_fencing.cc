// Copyright dlock authors. Conformance: fencing tokens (C8).
#include <memory>
#include <vector>

#include "conformance_fixture.h"

namespace dlock::testing {
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
    ASSERT_OK_AND_ASSIGN(Acquired acquired,
                         lock.TryAcquire(WithLease(kLongLease)));
    ASSERT_GT(acquired.fencing_token, last) << "acquisition " << i;
    last = acquired.fencing_token;
    ASSERT_OK(lock.Release());
  }
}

TEST_P(Conformance, C8_ReentryReturnsSameToken) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("re-entered"));
  ASSERT_OK_AND_ASSIGN(Acquired first, lock->TryAcquire());
  ASSERT_OK_AND_ASSIGN(uint64_t token, lock->FencingToken());
  EXPECT_EQ(token, first.fencing_token);
  for (int i = 2; i <= 4; ++i) {
    ASSERT_OK_AND_ASSIGN(Acquired again, lock->TryAcquire());
    EXPECT_EQ(again.hold_count, i);
    EXPECT_EQ(again.fencing_token, first.fencing_token);
    ASSERT_OK_AND_ASSIGN(token, lock->FencingToken());
    EXPECT_EQ(token, first.fencing_token);
  }
  ASSERT_OK_AND_ASSIGN(LockInfo info, lock->Inspect());
  EXPECT_EQ(info.fencing_token, first.fencing_token);
  for (int i = 0; i < 4; ++i) ASSERT_OK(lock->Release());

  // Fully released, the next hold is a fresh one.
  ASSERT_OK_AND_ASSIGN(Acquired fresh, lock->TryAcquire());
  EXPECT_EQ(fresh.hold_count, 1);
  EXPECT_GT(fresh.fencing_token, first.fencing_token);
  EXPECT_OK(lock->Release());
}

// Tokens keep growing however the previous hold ended: released, expired,
// or removed by force.
TEST_P(Conformance, C8_TokensIncreaseAfterExpiryAndForceUnlock) {
  ASSERT_OK_AND_ASSIGN(auto first_client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto second_client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto first, first_client->GetLock("forced"));
  ASSERT_OK_AND_ASSIGN(auto second, second_client->GetLock("forced"));

  ASSERT_OK_AND_ASSIGN(Acquired a, first->TryAcquire(WithLease(kLongLease)));
  ASSERT_OK(second->ForceUnlock());
  ASSERT_OK_AND_ASSIGN(Acquired b,
                       second->TryAcquire(WithLease(absl::Milliseconds(200))));
  EXPECT_GT(b.fencing_token, a.fencing_token);
  ASSERT_OK_AND_ASSIGN(Acquired c,
                       first->Acquire(WithLease(kLongLease, kNoHang)));
  EXPECT_GT(c.fencing_token, b.fencing_token);
  EXPECT_OK(first->Release());
}

}  // namespace
}  // namespace dlock::testing
