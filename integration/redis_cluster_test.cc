// Copyright dlock authors. The throwaway Redis Cluster of the tests
// (integration/redis_cluster.h): what the cluster backend's tests rely on.
// One cluster for the binary (about 3 s to form), a slot migration and one
// failover.
#include "redis_cluster.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
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

// A killed master's replica takes over its slots, and the killed node
// rejoins as a replica once started again.
TEST_F(RedisClusterTest, AKilledMastersReplicaTakesOver) {
  absl::StatusOr<int> old = cluster_->MasterOfSlot(100);
  ASSERT_OK(old);
  ASSERT_OK(cluster_->Kill(*old));
  absl::StatusOr<int> promoted = cluster_->WaitForFailover(100, *old);
  ASSERT_OK(promoted);
  EXPECT_NE(*promoted, *old);
  ASSERT_OK(cluster_->Restart(*old));
  absl::Status settled = cluster_->WaitUntilSettled();
  ASSERT_OK(settled);
  absl::StatusOr<RespReply> role = cluster_->Query(*old, {"ROLE"});
  ASSERT_OK(role);
  EXPECT_EQ(role->elements[0].text, "slave");
}

}  // namespace
}  // namespace dlock
