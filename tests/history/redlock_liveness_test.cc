// Copyright dlock authors. Redlock holder liveness (issue 12): a holder of a
// ten-minute lease cut off from every master loses the lock to a waiter
// within its liveness TTL plus a round trip, and is told first (C19). The
// history test (history_test.cc, "redlock3_liveness_sigkill_10m_lease")
// kills such a holder; this partitions one, which needs a proxy in front of
// each master. The result is printed as "REDLOCK liveness_partition...".
#include <atomic>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "history_run.h"
#include "redis_server.h"
#include "redlock_masters.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

constexpr absl::Duration kTtl = absl::Seconds(2);
constexpr absl::Duration kTenMinutes = absl::Minutes(10);
// The TTL, a waiter's round trip to three masters, and 1.5 s for
// scheduling on a loaded machine (as history_test.cc allows).
const absl::Duration kTakeoverBound = kTtl + absl::Milliseconds(1500);

TEST(RedlockLiveness, PartitionedHolderOfATenMinuteLeaseIsToldThenTakenOver) {
  ASSERT_OK_AND_ASSIGN(RedisGroup * group, RedlockGroup(3));
  const std::string ns = FreshNamespace("liveness");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ProxiedMasters> masters,
                       ProxiedMasters::Start(*group));
  ClientOptions options;
  options.liveness_ttl = kTtl;
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<LockClient> holder,
      Connect(masters->Uri(ns, "operation_timeout=200ms"), options));
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<LockClient> waiter,
      Connect(absl::StrCat("redlock://", group->Hosts(), "?namespace=", ns),
              options));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> held,
                       holder->GetLock("long-job"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> wanted,
                       waiter->GetLock("long-job"));
  std::atomic<int64_t> lost_at{0};
  AcquireOptions ten_minutes;
  ten_minutes.lease = kTenMinutes;
  ten_minutes.on_lost = [&lost_at](const LockLostEvent&) {
    lost_at = MonoNowNs();
  };
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire(ten_minutes));

  for (int i = 0; i < group->size(); ++i) {
    ASSERT_OK(masters->proxy(i).Partition());
  }
  const int64_t partitioned_at = MonoNowNs();
  absl::StatusOr<Hold> taken =
      wanted->Acquire({.wait = absl::Seconds(20), .lease = kTenMinutes});
  const int64_t granted_at = MonoNowNs();
  const LockState holder_state_at_grant = hold.state();
  std::cout << "REDLOCK liveness_partition_10m_lease: ttl=" << kTtl
            << " takeover_after="
            << (taken.ok() ? absl::FormatDuration(
                                 absl::Nanoseconds(granted_at - partitioned_at))
                           : taken.status().ToString())
            << " holder_told_after="
            << (lost_at.load() == 0 ? std::string("never")
                                    : absl::FormatDuration(absl::Nanoseconds(
                                          lost_at.load() - partitioned_at)))
            << std::endl;
  ASSERT_OK(taken) << "the waiter did not get the lock within 20 s: the "
                      "holder's ten-minute lease kept it";
  EXPECT_LT(absl::Nanoseconds(granted_at - partitioned_at), kTakeoverBound);
  // C19: the holder stopped believing before the waiter's grant.
  EXPECT_NE(lost_at.load(), 0) << "the holder was never told";
  EXPECT_LT(lost_at.load(), granted_at);
  EXPECT_NE(holder_state_at_grant, LockState::kHeld);
  EXPECT_GT(taken->fencing_token(), hold.fencing_token());
  for (int i = 0; i < group->size(); ++i) {
    ASSERT_OK(masters->proxy(i).Heal());
  }
  EXPECT_OK(taken->Release());
}

}  // namespace
}  // namespace dlock::test
