// redis-sentinel://: the client finds the master through the Sentinels and
// follows a failover; without wait_replicas a failover can lose a grant and
// hand the lock to a second owner (the fence catches the stale write), with
// it the grant survives the failover or the acquire fails. Every case runs
// on a plain group and on one over TLS (rediss-sentinel://: every server and
// Sentinel takes only TLS, replication and the Sentinels' links included).
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redis_sentinel_group.h"
#include "status_testing.h"

namespace dlock {
namespace {

using ::dlock::test::EventuallyOk;
using ::dlock::test::RedisSentinelGroup;
using ::testing::HasSubstr;

constexpr absl::Duration kSettle = absl::Seconds(20);

class RedisSentinel : public ::testing::TestWithParam<bool> {
 protected:
  // A group, plain or (GetParam()) over TLS.
  std::unique_ptr<RedisSentinelGroup> StartGroup() {
    absl::StatusOr<std::unique_ptr<RedisSentinelGroup>> group =
        RedisSentinelGroup::Start({.tls = GetParam()});
    EXPECT_OK(group);
    return group.ok() ? *std::move(group) : nullptr;
  }

  static std::string SentinelUri(const RedisSentinelGroup& group,
                                 const std::string& query) {
    std::string tls;
    if (group.tls()) {
      absl::StatusOr<std::string> trust = test::TestTlsQuery(false);
      EXPECT_OK(trust);
      tls = absl::StrCat("&", trust.value_or(""));
    }
    return absl::StrCat(
        group.tls() ? "rediss-sentinel://" : "redis-sentinel://",
        group.SentinelUri(), "/", group.master_name(), "?", query, tls);
  }
};

INSTANTIATE_TEST_SUITE_P(Transports, RedisSentinel, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Tls" : "Plain";
                         });

// The resource side of fencing: accepts a write only with a token larger
// than every one it accepted.
class FencedResource {
 public:
  bool Write(uint64_t token) {
    if (token <= last_) return false;
    last_ = token;
    return true;
  }

 private:
  uint64_t last_ = 0;
};

TEST_P(RedisSentinel, FollowsAFailoverAndKeepsAReplicatedHold) {
  std::unique_ptr<RedisSentinelGroup> group = StartGroup();
  ASSERT_NE(group, nullptr);
  ASSERT_OK_AND_ASSIGN(auto client,
                       Connect(SentinelUri(*group, "namespace=follow")));
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("job"));
  ASSERT_OK_AND_ASSIGN(Hold hold,
                       lock->TryAcquire({.lease = absl::Seconds(30)}));
  ASSERT_OK_AND_ASSIGN(const int old_master, group->CurrentMasterPort());

  ASSERT_OK(group->Failover());
  ASSERT_OK_AND_ASSIGN(const int new_master, group->CurrentMasterPort());
  ASSERT_NE(new_master, old_master);

  // The client follows by itself (Unavailable at most during the switch),
  // and the new master has the hold, which was replicated before it.
  ASSERT_OK_AND_ASSIGN(
      LockInfo info,
      EventuallyOk([&] { return client->Admin().Inspect("job"); }, kSettle));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.owner, hold.owner());
  ASSERT_OK_AND_ASSIGN(auto other, client->GetLock("other"));
  ASSERT_OK_AND_ASSIGN(Hold more, other->TryAcquire());
  EXPECT_OK(more.Release());
  EXPECT_OK(hold.Release());
  EXPECT_THAT(client->endpoint(), HasSubstr(group->master_name()));
}

TEST_P(RedisSentinel, WithoutWaitAFailoverCanGrantTheLockTwice) {
  std::unique_ptr<RedisSentinelGroup> group = StartGroup();
  ASSERT_NE(group, nullptr);
  const std::string uri = SentinelUri(*group, "namespace=twice");
  ASSERT_OK_AND_ASSIGN(auto first_client, Connect(uri));
  ASSERT_OK_AND_ASSIGN(auto first, first_client->GetLock("account"));
  std::optional<Hold> first_hold;
  // The grant reaches the master only: the failover promotes a replica
  // that never saw it.
  ASSERT_OK(group
                ->FailoverLosingWrites([&]() -> absl::Status {
                  absl::StatusOr<Hold> h =
                      first->TryAcquire({.lease = absl::Seconds(30)});
                  if (!h.ok()) return h.status();
                  first_hold.emplace(*std::move(h));
                  return absl::OkStatus();
                })
                .status());
  ASSERT_TRUE(first_hold.has_value());

  ASSERT_OK_AND_ASSIGN(auto second_client, Connect(uri));
  ASSERT_OK_AND_ASSIGN(auto second, second_client->GetLock("account"));
  ASSERT_OK_AND_ASSIGN(
      Hold second_hold,
      EventuallyOk(
          [&] { return second->TryAcquire({.lease = absl::Seconds(30)}); },
          kSettle));
  // Two owners believe they hold the lock (docs/redis.md: why to use
  // wait_replicas or Redlock where this matters).
  EXPECT_FALSE(first_hold->lost());
  EXPECT_FALSE(second_hold.lost());
  // Tokens come from the server's clock (docs/redis.md), and the promoted
  // replica's runs on from the lost grant's: the second owner's token is
  // the larger, so the resource takes the newer owner's write and refuses
  // the stale one.
  EXPECT_GT(second_hold.fencing_token(), first_hold->fencing_token());
  FencedResource resource;
  EXPECT_TRUE(resource.Write(second_hold.fencing_token()));
  EXPECT_FALSE(resource.Write(first_hold->fencing_token()))
      << "the stale holder's write got through the fence";
}

TEST_P(RedisSentinel, WaitReplicasFailsTheGrantOrKeepsItAcrossAFailover) {
  std::unique_ptr<RedisSentinelGroup> group = StartGroup();
  ASSERT_NE(group, nullptr);
  const std::string uri = SentinelUri(
      *group, "namespace=waited&wait_replicas=1&wait_timeout=200ms");
  ASSERT_OK_AND_ASSIGN(auto client, Connect(uri));
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("account"));

  // No replica takes the grant: the acquire fails and leaves nothing.
  ASSERT_OK(group->PauseReplica());
  absl::StatusOr<Hold> refused = lock->TryAcquire();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), HasSubstr("replicas"));
  ASSERT_OK_AND_ASSIGN(LockInfo info, client->Admin().Inspect("account"));
  EXPECT_FALSE(info.locked);
  ASSERT_OK(group->ResumePaused());
  ASSERT_OK(group->WaitUntilSettled());

  // Replicated before it returned: the grant survives the master's death.
  ASSERT_OK_AND_ASSIGN(Hold hold,
                       lock->TryAcquire({.lease = absl::Seconds(30)}));
  ASSERT_OK_AND_ASSIGN(const int old_master, group->CurrentMasterPort());
  ASSERT_OK(group->KillMaster());
  ASSERT_OK(group->WaitForFailoverFrom(old_master).status());
  ASSERT_OK_AND_ASSIGN(auto other_client, Connect(uri));
  ASSERT_OK_AND_ASSIGN(auto other, other_client->GetLock("account"));
  absl::StatusOr<Hold> taken = other->TryAcquire();
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kDeadlineExceeded)
      << "the lock was handed to a second owner: " << taken.status();
  ASSERT_OK_AND_ASSIGN(
      info, EventuallyOk([&] { return client->Admin().Inspect("account"); },
                         kSettle));
  EXPECT_EQ(info.owner, hold.owner());
  EXPECT_OK(EventuallyOk([&] { return hold.Release(); }, kSettle));
}

TEST(RedisSentinelUri, ErrorsSayWhatToFix) {
  for (const char* uri :
       {"redis-sentinel://127.0.0.1:1", "redis-sentinel://127.0.0.1:1/a/b/c",
        "redis-sentinel://127.0.0.1:1/m?wait_replicas=-1"}) {
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument)
        << uri << ": " << client.status();
  }
  absl::StatusOr<std::unique_ptr<LockClient>> none =
      Connect("redis-sentinel://127.0.0.1:1/mymaster");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(none.status().message(), HasSubstr("no Sentinel names"));
}

}  // namespace
}  // namespace dlock
