// Copyright dlock authors. The throwaway Redis Cluster of the tests
// (integration/redis_cluster.h): what the cluster backend's tests rely on.
// One cluster for the binary (about 3 s to form), slot migrations and one
// failover.
#include "redis_cluster.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

using test::RedisCluster;
using test::RespReply;

class RedisClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<RedisCluster>> cluster =
        RedisCluster::Start();
    if (cluster.ok()) {
      cluster_ = cluster->release();
    } else {
      error_ = new absl::Status(cluster.status());
    }
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  void SetUp() override { ASSERT_NE(cluster_, nullptr) << *error_; }
  void TearDown() override {
    if (HasFailure() && cluster_ != nullptr) {
      std::cerr << "end of the nodes' logs:\n" << cluster_->LogTails();
    }
  }

  static RedisCluster* cluster_;
  static absl::Status* error_;
};

RedisCluster* RedisClusterTest::cluster_ = nullptr;
absl::Status* RedisClusterTest::error_ = nullptr;

// "{tag}..." keys of a chosen slot: the harness's CLUSTER KEYSLOT.
int Slot(RedisCluster& cluster, const std::string& key) {
  absl::StatusOr<RespReply> slot =
      cluster.Query(cluster.ports()[0], {"CLUSTER", "KEYSLOT", key});
  EXPECT_OK(slot);
  return slot.ok() ? std::stoi(slot->text) : -1;
}

TEST_F(RedisClusterTest, ThreeMastersShareTheSlotsEachWithAReplicaInSync) {
  absl::StatusOr<std::vector<int>> masters = cluster_->MasterPorts();
  ASSERT_OK(masters);
  EXPECT_EQ(masters->size(), 3u);
  EXPECT_EQ(cluster_->ports().size(), 6u);
  for (int port : cluster_->ports()) {
    absl::StatusOr<RespReply> role = cluster_->Query(port, {"ROLE"});
    ASSERT_OK(role);
    const bool is_master = absl::c_linear_search(*masters, port);
    EXPECT_EQ(role->elements[0].text, is_master ? "master" : "slave") << port;
  }
  // Slot 0, the middle and the last are on three different masters.
  absl::StatusOr<int> first = cluster_->MasterOfSlot(0);
  absl::StatusOr<int> middle = cluster_->MasterOfSlot(8192);
  absl::StatusOr<int> last = cluster_->MasterOfSlot(16383);
  ASSERT_TRUE(first.ok() && middle.ok() && last.ok());
  EXPECT_NE(*first, *middle);
  EXPECT_NE(*middle, *last);
  EXPECT_NE(*first, *last);
  EXPECT_OK(cluster_->WaitUntilSettled());
}

// A slot moved with its keys: the new master serves them, the old one
// redirects (MOVED).
TEST_F(RedisClusterTest, AMigratedSlotTakesItsKeysAlong) {
  const std::string key = "{migrated}k";
  const int slot = Slot(*cluster_, key);
  absl::StatusOr<int> from = cluster_->MasterOfSlot(slot);
  ASSERT_OK(from);
  ASSERT_OK(cluster_->Query(*from, {"SET", key, "v"}));
  absl::StatusOr<std::vector<int>> masters = cluster_->MasterPorts();
  ASSERT_OK(masters);
  const int to = (*masters)[0] == *from ? (*masters)[1] : (*masters)[0];
  ASSERT_OK(cluster_->BeginSlotMigration(slot, to));
  // Half-moved: the key is still at the source, which serves it.
  absl::StatusOr<RespReply> during = cluster_->Query(*from, {"GET", key});
  ASSERT_OK(during);
  EXPECT_EQ(during->text, "v");
  absl::Status finished = cluster_->FinishSlotMigration(slot, to);
  ASSERT_OK(finished);
  absl::StatusOr<RespReply> moved = cluster_->Query(to, {"GET", key});
  ASSERT_OK(moved);
  EXPECT_EQ(moved->text, "v");
  absl::StatusOr<RespReply> old = cluster_->Query(*from, {"GET", key});
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("MOVED"), std::string::npos)
      << old.status();
  ASSERT_OK(cluster_->MigrateSlot(slot, *from));  // back
}

// No key on any master: the history faults' hooks look for one.
void FlushMasters(RedisCluster& cluster) {
  absl::StatusOr<std::vector<int>> masters = cluster.MasterPorts();
  ASSERT_OK(masters);
  for (int port : *masters) ASSERT_OK(cluster.Query(port, {"FLUSHALL"}));
}

// The master serving `slot` now, which must not be `before` and must have
// `key` with value "v"; 0 if none serves it.
int NewMasterWithKey(RedisCluster& cluster, int slot, const std::string& key,
                     int before) {
  absl::StatusOr<int> now = cluster.MasterOfSlot(slot);
  EXPECT_OK(now);
  if (!now.ok()) return 0;
  EXPECT_NE(*now, before);
  absl::StatusOr<RespReply> value = cluster.Query(*now, {"GET", key});
  EXPECT_OK(value);
  if (value.ok()) {
    EXPECT_EQ(value->text, "v");
  }
  return *now;
}

// The history checker's hooks find the one lock's slot by its key, and
// refuse to guess between two.
TEST_F(RedisClusterTest, TheHistoryFaultsFindTheSlotWithKeys) {
  FlushMasters(*cluster_);
  EXPECT_CODE(cluster_->SlotWithKeys(absl::ZeroDuration()).status(),
              kDeadlineExceeded);
  const std::string key = "{held}k";
  const int slot = Slot(*cluster_, key);
  absl::StatusOr<int> from = cluster_->MasterOfSlot(slot);
  ASSERT_OK(from);
  ASSERT_OK(cluster_->Query(*from, {"SET", key, "v"}));
  ASSERT_OK_AND_ASSIGN(const int found,
                       cluster_->SlotWithKeys(absl::Seconds(1)));
  EXPECT_EQ(found, slot);
  const std::string other = "{other}k";
  absl::StatusOr<int> other_master =
      cluster_->MasterOfSlot(Slot(*cluster_, other));
  ASSERT_OK(other_master);
  ASSERT_OK(cluster_->Query(*other_master, {"SET", other, "v"}));
  EXPECT_CODE(cluster_->SlotWithKeys(absl::Seconds(1)).status(),
              kFailedPrecondition);
  ASSERT_OK(cluster_->Query(*other_master, {"DEL", other}));
  // Moved to another master with its key.
  ASSERT_OK(cluster_->MigrateSlotWithKeys(absl::Milliseconds(100)));
  const int to = NewMasterWithKey(*cluster_, slot, key, *from);
  ASSERT_NE(to, 0);
  ASSERT_OK(cluster_->Query(to, {"DEL", key}));
}

// A killed master's replica takes over its slots with the keys it had, and
// the killed node rejoins as the promoted one's replica, in sync.
TEST_F(RedisClusterTest, AKilledMastersReplicaTakesOverAndItRejoinsInSync) {
  FlushMasters(*cluster_);
  const std::string key = "{killed}k";
  const int slot = Slot(*cluster_, key);
  absl::StatusOr<int> old = cluster_->MasterOfSlot(slot);
  ASSERT_OK(old);
  ASSERT_OK(cluster_->Query(*old, {"SET", key, "v"}));
  ASSERT_OK(cluster_->WaitForReplicasInSync(*old));
  EXPECT_CODE(cluster_->WaitForPromotion(), kFailedPrecondition);
  ASSERT_OK(cluster_->KillMasterWithKeys());
  ASSERT_OK(cluster_->WaitForPromotion());
  const int promoted = NewMasterWithKey(*cluster_, slot, key, *old);
  ASSERT_NE(promoted, 0);
  ASSERT_OK(cluster_->RejoinAsReplica());
  absl::StatusOr<RespReply> role = cluster_->Query(*old, {"ROLE"});
  ASSERT_OK(role);
  EXPECT_EQ(role->elements[0].text, "slave");
  absl::StatusOr<int> replica = cluster_->ReplicaOf(promoted);
  ASSERT_OK(replica);
  EXPECT_EQ(*replica, *old);
  EXPECT_OK(cluster_->WaitForReplicasInSync(promoted));
  ASSERT_OK(cluster_->Query(promoted, {"DEL", key}));
}

// A node stalled while the others meet it (a loaded machine) past the
// handshake timeout, after which they forget the handshake for good, is in
// the cluster all the same.
TEST(RedisClusterStartTest, ANodeStalledWhileMetJoinsAllTheSame) {
  absl::StatusOr<std::unique_ptr<RedisCluster>> cluster =
      RedisCluster::Start({.masters = 3,
                           .replicas_per_master = 0,
                           .first_node_stalled_while_met = absl::Seconds(2)});
  ASSERT_OK(cluster);
  for (int port : (*cluster)->ports()) {
    absl::StatusOr<RespReply> info =
        (*cluster)->Query(port, {"CLUSTER", "INFO"});
    ASSERT_OK(info);
    EXPECT_TRUE(absl::StrContains(info->text, "cluster_known_nodes:3"))
        << port << ": " << info->text;
  }
}

}  // namespace
}  // namespace dlock
