// Copyright dlock authors. The zk:// queue driver without a server: where a
// listing of a lock-name node puts our node (first, kept out, behind its
// predecessor, gone), and the ends it reads from node data.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "zk_driver.h"
#include "zk_layout.h"

namespace dlock::zk {
namespace {

using Position = QueueView::Position;

constexpr char kA[] = "a-1-lock-0000000003";
constexpr char kB[] = "b-1-lock-0000000005";
constexpr char kOwn[] = "c-1-lock-0000000009";

TEST(ZooKeeperDriver, FirstInTheQueueTakesTheLock) {
  const QueueView view = LookAtQueue({kOwn, "not a lock node"}, kOwn, {});
  EXPECT_EQ(view.position, Position::kFirst);
}

TEST(ZooKeeperDriver, BehindWatchesOnlyItsPredecessor) {
  // Listed in any order: the sequence numbers decide.
  const QueueView view = LookAtQueue({kOwn, kB, kA}, kOwn, {});
  EXPECT_EQ(view.position, Position::kBehind);
  EXPECT_EQ(view.holder, kA);
  EXPECT_EQ(view.predecessor, kB);
  EXPECT_FALSE(view.next_in_line);
  const QueueView next = LookAtQueue({kB, kA}, kB, {});
  EXPECT_EQ(next.predecessor, kA);
  EXPECT_TRUE(next.next_in_line);
}

TEST(ZooKeeperDriver, AWriterBehindReadersWaitsAndKnowsThem) {
  constexpr char kRead[] = "r-1-read-lock-0000000004";
  constexpr char kLater[] = "r-2-read-lock-0000000011";
  const QueueView view = LookAtQueue({kLater, kOwn, kB, kRead, kA}, kOwn, {});
  EXPECT_EQ(view.position, Position::kBehind);
  EXPECT_EQ(view.holder, kA);
  EXPECT_EQ(view.predecessor, kB);
  // Only the readers queued before it: a later one waits behind it.
  EXPECT_EQ(view.reads_ahead, (std::vector<std::string>{kRead}));
  EXPECT_EQ(LookAtQueue({kRead, kOwn}, kOwn, {}).predecessor, kRead);
}

TEST(ZooKeeperDriver, AKeptLockKeepsTheFirstNodeWaiting) {
  const std::string kept = KeptNodeName(41);
  const QueueView view = LookAtQueue({kept, kOwn}, kOwn, {});
  EXPECT_EQ(view.position, Position::kKept);
  EXPECT_EQ(view.kept, std::vector<std::string>{kept});
  // A node named like a kept one whose data was not dlock's keeps nothing
  // once looked at.
  EXPECT_EQ(LookAtQueue({kept, kOwn}, kOwn, {kept}).position, Position::kFirst);
}

TEST(ZooKeeperDriver, AMissingNodeIsGone) {
  EXPECT_EQ(LookAtQueue({kA, kB}, kOwn, {}).position, Position::kGone);
  EXPECT_EQ(LookAtQueue({}, kOwn, {}).position, Position::kGone);
}

TEST(ZooKeeperDriver, EndsAreReadOnZooKeepersClock) {
  Reply lock_node;
  lock_node.data = Serialize(NodeData{.owner = "t:job", .lease_ms = 3000});
  lock_node.stat.mtime = 1'000'000;
  EXPECT_EQ(LeaseEnd(lock_node), 1'003'000);
  EXPECT_EQ(KeptEnd(lock_node), std::nullopt);

  Reply kept_node;
  kept_node.data = SerializeKept(KeptData{.keep_ms = 500, .token = 7});
  kept_node.stat.mtime = 2'000'000;
  EXPECT_EQ(KeptEnd(kept_node), 2'000'500);
  EXPECT_EQ(LeaseEnd(kept_node), INT64_MAX) << "not a lock node";
}

}  // namespace
}  // namespace dlock::zk
