// redis-cluster:// on a real cluster (integration/redis_cluster.h: 3 masters
// with a replica each): locks spread over every master; the failure classes
// other clients hit (a script reading a key it was not given, a name with
// braces); a slot migrated while its locks are held (ASK, then MOVED);
// waiters woken by sharded pub/sub; wait_replicas; and what a wrong URI
// says.
#include "redis_cluster.h"

#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "fault_proxy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redis_lock_ops.h"
#include "redis_server.h"
#include "status_testing.h"

namespace dlock {
namespace {

using ::dlock::redis::KeySlot;
using ::dlock::redis::Keyspace;
using ::dlock::test::EventuallyOk;
using ::dlock::test::RedisCluster;
using ::dlock::test::RespReply;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

class RedisClusterBackend : public ::testing::Test {
 protected:
  // One cluster per process (each case runs in a process of its own),
  // stopped and removed at exit.
  void SetUp() override {
    static absl::StatusOr<std::unique_ptr<RedisCluster>> cluster =
        RedisCluster::Start();
    ASSERT_OK(cluster);
    cluster_ = cluster->get();
  }
  void TearDown() override {
    if (HasFailure() && cluster_ != nullptr) {
      std::cerr << "end of the nodes' logs:\n" << cluster_->LogTails();
    }
  }

  std::string Uri(const std::string& ns, const std::string& query = "") {
    return absl::StrCat("redis-cluster://", cluster_->Seeds(),
                        "?namespace=", ns, query.empty() ? "" : "&", query);
  }

  // The master that holds `key` now, and whether the key is there.
  bool KeyOnItsMaster(const std::string& key) {
    absl::StatusOr<int> master = cluster_->MasterOfSlot(KeySlot(key));
    if (!master.ok()) return false;
    absl::StatusOr<RespReply> exists =
        cluster_->Query(*master, {"EXISTS", key});
    return exists.ok() && exists->text == "1";
  }

  // A master other than the one of `slot`.
  int OtherMaster(int slot) {
    absl::StatusOr<int> owner = cluster_->MasterOfSlot(slot);
    absl::StatusOr<std::vector<int>> masters = cluster_->MasterPorts();
    EXPECT_OK(owner);
    EXPECT_OK(masters);
    if (!owner.ok() || !masters.ok()) return 0;
    return (*masters)[0] == *owner ? (*masters)[1] : (*masters)[0];
  }

  RedisCluster* cluster_ = nullptr;
};

TEST_F(RedisClusterBackend, LocksSpreadOverEveryMasterAndAreListedFromAll) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> client,
                       Connect(Uri("spread")));
  const Keyspace keys("spread", 0);
  std::vector<Hold> holds;
  std::set<int> masters;
  for (int i = 0; i < 30; ++i) {
    const std::string name = absl::StrCat("job-", i);
    ASSERT_OK_AND_ASSIGN(Hold hold, client->TryAcquire(name));
    holds.push_back(std::move(hold));
    EXPECT_TRUE(KeyOnItsMaster(keys.LockKey(name))) << name;
    masters.insert(cluster_->MasterOfSlot(KeySlot(keys.LockKey(name))).value());
  }
  EXPECT_EQ(masters.size(), 3u);
  ASSERT_OK_AND_ASSIGN(std::vector<LockInfo> listed, client->Admin().List());
  EXPECT_EQ(listed.size(), 30u);
  ASSERT_OK_AND_ASSIGN(ServerMemory memory, client->Admin().ServerMemoryUse());
  EXPECT_GT(memory.bytes, 0);
  for (Hold& hold : holds) EXPECT_OK(hold.Release());
  ASSERT_OK_AND_ASSIGN(listed, client->Admin().List());
  EXPECT_TRUE(listed.empty());
}

// A name's braces cannot pull its lock into another's slot: every lock's
// one key is in the slot of its own "<ns>:<name>" tag, cut at the name's
// first '}', on the master that serves that slot.
TEST_F(RedisClusterBackend, ANameWithBracesMapsToOneSlotOfItsOwn) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> client,
                       Connect(Uri("braces")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> other,
                       Connect(Uri("braces")));
  const Keyspace keys("braces", 0);
  for (const std::string name :
       {"{a}", "{b}", "x{a}y", "a}b", "}{", "{", "}", "{}", "a{b{c}d}e"}) {
    SCOPED_TRACE(name);
    const std::string key = keys.LockKey(name);
    absl::StatusOr<RespReply> slot =
        cluster_->Query(cluster_->ports()[0], {"CLUSTER", "KEYSLOT", key});
    ASSERT_OK(slot);
    EXPECT_EQ(slot->text, absl::StrCat(KeySlot(key)));
    ASSERT_OK_AND_ASSIGN(Hold hold, client->TryAcquire(name));
    EXPECT_TRUE(KeyOnItsMaster(key));
    EXPECT_CODE(other->TryAcquire(name).status(), kDeadlineExceeded);
    EXPECT_OK(hold.Release());
  }
  // "{a}" and "{b}" are not the namespace's one slot.
  EXPECT_NE(KeySlot(keys.LockKey("{a}")), KeySlot(keys.LockKey("{b}")));
}

// The cluster refuses a script that reads a key it was not given in
// another slot; every dlock operation (grant, re-entry, renewal, a
// waiter's mark, inspection, release and keep, both force unlocks, the
// heartbeat) runs there without one refusal.
TEST_F(RedisClusterBackend, AnUndeclaredKeyIsRefusedAndNoneOfOursIs) {
  const Keyspace keys("declared", 0);
  const std::string key = keys.LockKey("invoice");
  ASSERT_OK_AND_ASSIGN(int master, cluster_->MasterOfSlot(KeySlot(key)));
  // A key another master serves, read but not declared.
  std::string undeclared;
  for (int i = 0; undeclared.empty(); ++i) {
    const std::string candidate = keys.LockKey(absl::StrCat("elsewhere", i));
    if (cluster_->MasterOfSlot(KeySlot(candidate)).value_or(master) != master) {
      undeclared = candidate;
    }
  }
  absl::StatusOr<RespReply> refused = cluster_->Query(
      master,
      {"EVAL", absl::StrCat("return redis.call('GET', '", undeclared, "')"),
       "1", key});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("non local key"));

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> client,
                       Connect(Uri("declared", "liveness_ttl=300ms")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> other,
                       Connect(Uri("declared", "liveness_ttl=300ms")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> lock,
                       client->GetLock("invoice"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire({.lease = absl::Minutes(1)}));
  ASSERT_OK_AND_ASSIGN(Hold again, lock->Acquire({.lease = absl::Minutes(2)}));
  EXPECT_OK(hold.Renew());
  EXPECT_CODE(
      other->Acquire("invoice", {.wait = absl::Milliseconds(50)}).status(),
      kDeadlineExceeded);
  absl::SleepFor(absl::Milliseconds(400));  // heartbeats
  ASSERT_OK_AND_ASSIGN(LockInfo info, client->Admin().Inspect("invoice"));
  EXPECT_EQ(info.hold_count, 2);
  EXPECT_EQ(info.holder_live, std::optional<bool>(true));
  EXPECT_EQ(hold.state(), LockState::kHeld);
  EXPECT_OK(again.Release());
  EXPECT_OK(hold.ReleaseAndKeepFor(absl::Milliseconds(100)));
  EXPECT_OK(client->Admin().ForceUnlock("invoice"));
  ASSERT_OK_AND_ASSIGN(Hold next, other->TryAcquire("invoice"));
  EXPECT_OK(client->Admin().ForceUnlock("invoice", next.fencing_token()));
}

// A slot moves to another master while a lock in it is held and another
// is taken mid-move: the first stays at the source until migrated, the
// second goes to the target through ASK; both are renewed throughout,
// keep their tokens and are refused to others, and after the move the
// client follows MOVED.
TEST_F(RedisClusterBackend, ASlotMigratedWhileLocksAreHeldIsFollowed) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> client,
                       Connect(Uri("moving")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> other,
                       Connect(Uri("moving")));
  const Keyspace keys("moving", 0);
  // Both names' tags end at their '}': "moving:batch", one slot.
  const int slot = KeySlot(keys.LockKey("batch}1"));
  ASSERT_EQ(slot, KeySlot(keys.LockKey("batch}2")));
  const int to = OtherMaster(slot);
  ASSERT_OK_AND_ASSIGN(const int from, cluster_->MasterOfSlot(slot));

  ASSERT_OK_AND_ASSIGN(
      Hold first, client->TryAcquire("batch}1", {.lease = absl::Minutes(1)}));
  ASSERT_OK(cluster_->BeginSlotMigration(slot, to));
  ASSERT_OK_AND_ASSIGN(
      Hold second, client->TryAcquire("batch}2", {.lease = absl::Minutes(1)}));
  EXPECT_OK(first.Renew());
  EXPECT_OK(second.Renew());
  EXPECT_CODE(other->TryAcquire("batch}1").status(), kDeadlineExceeded);
  EXPECT_CODE(other->TryAcquire("batch}2").status(), kDeadlineExceeded);

  ASSERT_OK(cluster_->FinishSlotMigration(slot, to));
  EXPECT_TRUE(KeyOnItsMaster(keys.LockKey("batch}1")));
  EXPECT_TRUE(KeyOnItsMaster(keys.LockKey("batch}2")));
  EXPECT_OK(first.Renew());
  EXPECT_OK(second.Renew());
  ASSERT_OK_AND_ASSIGN(LockInfo info, other->Admin().Inspect("batch}1"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.fencing_token, first.fencing_token());
  EXPECT_CODE(other->TryAcquire("batch}2").status(), kDeadlineExceeded);
  EXPECT_OK(first.Release());
  EXPECT_OK(second.Release());
  ASSERT_OK_AND_ASSIGN(Hold taken, other->TryAcquire("batch}1"));
  EXPECT_GT(taken.fencing_token(), first.fencing_token());
  EXPECT_OK(taken.Release());
  ASSERT_OK(cluster_->MigrateSlot(slot, from));  // as it was
}

// A waiter sleeps on its slot's shard channel: the holder's release wakes
// it at once, though its fallback poll is a minute away.
TEST_F(RedisClusterBackend, AWaiterIsWokenByTheReleaseOnItsShard) {
  ClientOptions slow_poll;
  slow_poll.fallback_poll = absl::Minutes(1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> holder,
                       Connect(Uri("woken")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> waiter,
                       Connect(Uri("woken"), slow_poll));
  for (const std::string name : {"report", "ledger}x"}) {
    SCOPED_TRACE(name);
    ASSERT_OK_AND_ASSIGN(Hold held,
                         holder->TryAcquire(name, {.lease = absl::Minutes(1)}));
    absl::Time released;
    std::thread release([&] {
      absl::SleepFor(absl::Milliseconds(300));
      released = absl::Now();
      EXPECT_OK(held.Release());
    });
    absl::StatusOr<Hold> got =
        waiter->Acquire(name, {.wait = absl::Seconds(30)});
    const absl::Time woke = absl::Now();
    release.join();
    ASSERT_OK(got);
    // Generous: a hang or a poll, not a timing, is what this catches.
    EXPECT_LT(woke - released, absl::Seconds(5));
    EXPECT_OK(got->Release());
  }
}

// A waiter subscribed on its slot's master while the slot moves away: the
// old master drops the subscription (SUNSUBSCRIBE), the waiter looks again,
// follows MOVED and subscribes at the new master, whose release wakes it
// though its fallback poll is a minute away.
TEST_F(RedisClusterBackend, AWaiterFollowsItsSlotToANewMaster) {
  ClientOptions slow_poll;
  slow_poll.fallback_poll = absl::Minutes(1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> holder,
                       Connect(Uri("follow")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> waiter,
                       Connect(Uri("follow"), slow_poll));
  const int slot = KeySlot(Keyspace("follow", 0).LockKey("report"));
  const int to = OtherMaster(slot);
  ASSERT_OK_AND_ASSIGN(const int from, cluster_->MasterOfSlot(slot));
  ASSERT_OK_AND_ASSIGN(
      Hold held, holder->TryAcquire("report", {.lease = absl::Minutes(1)}));
  absl::StatusOr<Hold> got = absl::UnknownError("not done");
  std::thread wait(
      [&] { got = waiter->Acquire("report", {.wait = absl::Seconds(30)}); });
  absl::SleepFor(absl::Milliseconds(300));  // subscribed at `from`
  ASSERT_OK(cluster_->MigrateSlot(slot, to));
  absl::SleepFor(absl::Milliseconds(300));  // subscribed at `to`
  const absl::Time released = absl::Now();
  EXPECT_OK(held.Release());
  wait.join();
  ASSERT_OK(got);
  // Generous: a poll (a minute), not a timing, is what this catches.
  EXPECT_LT(absl::Now() - released, absl::Seconds(10));
  EXPECT_OK(got->Release());
  ASSERT_OK(cluster_->MigrateSlot(slot, from));
}

// wait_replicas=1: every master has one replica, which takes each grant;
// asking for two fails the grant naming what was reached. A generous
// wait_timeout: a loaded machine's replica may ack late.
TEST_F(RedisClusterBackend, WaitReplicasCountsEachMastersReplicas) {
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<LockClient> one,
      Connect(Uri("replicated", "wait_replicas=1&wait_timeout=1s")));
  for (int i = 0; i < 6; ++i) {
    ASSERT_OK_AND_ASSIGN(Hold hold, one->TryAcquire(absl::StrCat("r", i)));
    EXPECT_OK(hold.Renew());
    EXPECT_OK(hold.Release());
  }
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<LockClient> two,
      Connect(Uri("replicated", "wait_replicas=2&wait_timeout=1s")));
  absl::StatusOr<Hold> refused = two->TryAcquire("r0");
  EXPECT_CODE(refused.status(), kUnavailable);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("reached 1 of the 2 replicas"));
  // Given back: another client can take it.
  EXPECT_OK(one->TryAcquire("r0").status());
}

// Without wait_replicas, a grant the master acknowledged and its replica
// never got is lost when the replica takes over: a second owner is granted
// the lock (docs/redis.md), and its larger token makes the resource refuse
// the first owner's writes.
TEST_F(RedisClusterBackend, WithoutWaitAFailoverCanGrantTheLockTwice) {
  const std::string uri = Uri("twice");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> first_client, Connect(uri));
  std::optional<Hold> first;
  const int slot = KeySlot(Keyspace("twice", 0).LockKey("account"));
  ASSERT_OK_AND_ASSIGN(const int old, cluster_->MasterOfSlot(slot));
  ASSERT_OK_AND_ASSIGN(
      const int promoted,
      cluster_->FailoverLosingWrites(slot, [&]() -> absl::Status {
        absl::StatusOr<Hold> h =
            first_client->TryAcquire("account", {.lease = absl::Seconds(30)});
        if (!h.ok()) return h.status();
        first.emplace(*std::move(h));
        return absl::OkStatus();
      }));
  ASSERT_TRUE(first.has_value());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> second_client, Connect(uri));
  ASSERT_OK_AND_ASSIGN(Hold second, EventuallyOk(
                                        [&] {
                                          return second_client->TryAcquire(
                                              "account",
                                              {.lease = absl::Seconds(30)});
                                        },
                                        absl::Seconds(20)));
  EXPECT_FALSE(first->lost());
  EXPECT_GT(second.fencing_token(), first->fencing_token());
  // The tests after this one kill masters and expect a replica to take
  // over: the old master back, in sync, as the promoted one's replica.
  ASSERT_OK(cluster_->RejoinAsReplicaOf(old, promoted));
}

// With wait_replicas=1 a grant returns only once the replica has it: the
// master's death does not free the lock, and the holder renews it on the
// promoted replica.
TEST_F(RedisClusterBackend, WithWaitReplicasAHoldSurvivesTheMastersDeath) {
  // A liveness TTL that outlasts the failover and the old master's return
  // as the new one's replica: until then no refresh can be replicated.
  const std::string uri =
      Uri("kept", "wait_replicas=1&wait_timeout=1s&liveness_ttl=30s");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> holder, Connect(uri));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> other, Connect(uri));
  ASSERT_OK_AND_ASSIGN(
      Hold hold, holder->TryAcquire("account", {.lease = absl::Minutes(1)}));
  const int slot = KeySlot(Keyspace("kept", 0).LockKey("account"));
  ASSERT_OK_AND_ASSIGN(const int old, cluster_->MasterOfSlot(slot));
  ASSERT_OK(cluster_->Kill(old));
  ASSERT_OK(cluster_->WaitForFailover(slot, old).status());
  // The other client's map still names the dead master: Unavailable
  // until it has read the new one, which has the hold.
  absl::StatusOr<Hold> refused = other->TryAcquire("account");
  for (const absl::Time until = absl::Now() + absl::Seconds(20);
       absl::IsUnavailable(refused.status()) && absl::Now() < until;) {
    absl::SleepFor(absl::Milliseconds(50));
    refused = other->TryAcquire("account");
  }
  EXPECT_TRUE(IsHeldByAnother(refused.status())) << refused.status();
  ASSERT_OK_AND_ASSIGN(LockInfo info, other->Admin().Inspect("account"));
  EXPECT_EQ(info.fencing_token, hold.fencing_token());
  // A master without its replica confirms no renewal (WAIT reaches 0 of
  // 1); the old master back as its replica, renewals count again.
  EXPECT_CODE(hold.Renew(), kUnavailable);
  ASSERT_OK(cluster_->Restart(old));
  ASSERT_OK(cluster_->WaitUntilSettled());
  EXPECT_OK(EventuallyOk([&] { return hold.Renew(); }, absl::Seconds(10)));
  EXPECT_OK(hold.Release());
}

// A client cut off from one master (a fault proxy the master names as its
// address) is told it lost that master's locks by their liveness deadline,
// and keeps the others': each master's heartbeat is its own.
TEST_F(RedisClusterBackend, APartitionedMasterLosesOnlyItsOwnLocksInTime) {
  const Keyspace keys("cut", 0);
  ASSERT_OK_AND_ASSIGN(std::vector<int> masters, cluster_->MasterPorts());
  std::map<int, std::string> name_on;  // master's port -> a lock it serves
  for (int i = 0; name_on.size() < masters.size(); ++i) {
    const std::string name = absl::StrCat("cut", i);
    ASSERT_OK_AND_ASSIGN(int master,
                         cluster_->MasterOfSlot(KeySlot(keys.LockKey(name))));
    name_on.emplace(master, name);
  }
  const int cut = masters[0];
  const int cut_slot = KeySlot(keys.LockKey(name_on[cut]));
  test::FaultProxy proxy;
  ASSERT_OK(proxy.Start("127.0.0.1", cut));
  ASSERT_OK(cluster_
                ->Query(cut, {"CONFIG", "SET", "cluster-announce-port",
                              absl::StrCat(proxy.port())})
                .status());
  ASSERT_OK(EventuallyOk(
      [&]() -> absl::Status {
        if (absl::Status s = cluster_->WaitUntilSettled(); !s.ok()) return s;
        absl::StatusOr<int> named = cluster_->MasterOfSlot(cut_slot);
        if (named.ok() && *named == proxy.port()) return absl::OkStatus();
        return absl::UnavailableError("the proxy is not announced yet");
      },
      absl::Seconds(10)));

  constexpr absl::Duration kTtl = absl::Seconds(2);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> client,
                       Connect(Uri("cut",
                                   "liveness_ttl=2s&operation_timeout=300ms&"
                                   "connect_timeout=300ms")));
  std::map<int, Hold> holds;
  for (const auto& [master, name] : name_on) {
    ASSERT_OK_AND_ASSIGN(Hold hold,
                         client->TryAcquire(name, {.lease = absl::Minutes(1)}));
    holds.emplace(master, std::move(hold));
  }
  ASSERT_OK(proxy.Partition());
  const absl::Time cut_at = absl::Now();
  while (!holds.at(cut).lost() && absl::Now() < cut_at + 5 * kTtl) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(holds.at(cut).lost());
  // Generous: the deadline is a confirmed refresh's send time + the TTL.
  EXPECT_LT(absl::Now() - cut_at, 2 * kTtl);
  absl::SleepFor(kTtl);  // the others' holds outlive a whole TTL more
  for (auto& [master, hold] : holds) {
    if (master != cut) {
      EXPECT_EQ(hold.state(), LockState::kHeld) << master;
    }
  }
  ASSERT_OK(proxy.Heal());
  ASSERT_OK(
      cluster_->Query(cut, {"CONFIG", "SET", "cluster-announce-port", "0"})
          .status());
}

// rediss-cluster://: every node takes only TLS (the bus and replication
// too); the client checks each node it learns from the slot map against
// the CA, and a waiter's subscription goes over TLS as well.
TEST(RedissCluster, LocksAndWakeUpsGoOverTls) {
  absl::StatusOr<std::unique_ptr<RedisCluster>> cluster =
      RedisCluster::Start({.tls = true});
  ASSERT_OK(cluster);
  ASSERT_OK_AND_ASSIGN(const std::string trust, test::TestTlsQuery(false));
  const std::string uri = absl::StrCat("rediss-cluster://", (*cluster)->Seeds(),
                                       "?namespace=tls&", trust);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> holder, Connect(uri));
  ClientOptions slow_poll;
  slow_poll.fallback_poll = absl::Minutes(1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> waiter,
                       Connect(uri, slow_poll));
  for (int i = 0; i < 3; ++i) {
    const std::string name = absl::StrCat("secret-", i);
    ASSERT_OK_AND_ASSIGN(Hold held, holder->TryAcquire(name));
    std::thread release([&] {
      absl::SleepFor(absl::Milliseconds(200));
      EXPECT_OK(held.Release());
    });
    absl::StatusOr<Hold> got =
        waiter->Acquire(name, {.wait = absl::Seconds(30)});
    release.join();
    ASSERT_OK(got);
    EXPECT_OK(got->Release());
  }
  // Without the CA, the first node's certificate is refused.
  EXPECT_CODE(
      Connect(absl::StrCat("rediss-cluster://", (*cluster)->Seeds())).status(),
      kUnauthenticated);
}

TEST_F(RedisClusterBackend, AWrongUriSaysWhatIsWrongAndNeverThePassword) {
  absl::StatusOr<std::unique_ptr<LockClient>> down =
      Connect("redis-cluster://u:s3cret-pw@127.0.0.1:1,127.0.0.1:2");
  EXPECT_CODE(down.status(), kUnavailable);
  EXPECT_THAT(down.status().message(),
              AllOf(HasSubstr("127.0.0.1:1"), HasSubstr("127.0.0.1:2"),
                    Not(HasSubstr("s3cret-pw"))));
  EXPECT_CODE(Connect(absl::StrCat("redis-cluster://", cluster_->Seeds(), "/3"))
                  .status(),
              kInvalidArgument);
  EXPECT_CODE(
      Connect(absl::StrCat(Uri("x"), "&tls_ca=/etc/ssl/ca.pem")).status(),
      kInvalidArgument);
  // One server that is no cluster node.
  absl::StatusOr<std::unique_ptr<test::RedisServer>> single =
      test::RedisServer::Start();
  ASSERT_OK(single);
  absl::StatusOr<std::unique_ptr<LockClient>> standalone =
      Connect(absl::StrCat("redis-cluster://127.0.0.1:", (*single)->port()));
  EXPECT_CODE(standalone.status(), kFailedPrecondition);
  EXPECT_THAT(
      standalone.status().message(),
      AllOf(HasSubstr("not a Redis Cluster node"), HasSubstr("redis://")));
}

}  // namespace
}  // namespace dlock
