// Copyright dlock authors. The throwaway Redis Sentinel group of the tests
// (integration/redis_sentinel_group.h): what failover tests rely on. Each
// test starts its own group (1 to 3 s) and keeps to a few failovers, so
// that the binary stays under 40 s on a loaded CI machine (about 15 s on an
// idle one).
#include "redis_sentinel_group.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

using test::RedisSentinelGroup;

std::string Bulk(const std::string& s) {
  return absl::StrCat("$", s.size(), "\r\n", s, "\r\n");
}

class RedisSentinelGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RedisSentinelGroup>> group =
        RedisSentinelGroup::Start();
    ASSERT_OK(group);
    group_ = *std::move(group);
  }

  // What the servers and Sentinels said, to tell a flaky run's cause.
  void TearDown() override {
    if (HasFailure() && group_ != nullptr) {
      std::cerr << "end of the group's logs:\n" << group_->LogTails();
    }
  }

  // The server that is not on `port`.
  int OtherServer(int port) const {
    const std::vector<int> ports = group_->server_ports();
    return ports[0] == port ? ports[1] : ports[0];
  }

  std::string Command(int port, const std::vector<std::string>& argv) {
    absl::StatusOr<std::string> reply = group_->RawCommand(port, argv);
    EXPECT_OK(reply);
    return reply.ok() ? *reply : "";
  }

  // What every Sentinel answers to get-master-addr-by-name.
  std::vector<std::string> SentinelMasterReplies() {
    std::vector<std::string> replies;
    for (int port : group_->sentinel_ports()) {
      replies.push_back(Command(port, {"SENTINEL", "get-master-addr-by-name",
                                       group_->master_name()}));
    }
    return replies;
  }

  static std::string MasterAddrReply(int port) {
    return absl::StrCat("*2\r\n", Bulk("127.0.0.1"), Bulk(absl::StrCat(port)));
  }

  std::unique_ptr<RedisSentinelGroup> group_;
};

TEST_F(RedisSentinelGroupTest, StartGivesAMasterEverySentinelAgreesOn) {
  ASSERT_EQ(group_->sentinel_ports().size(), 3u);
  ASSERT_EQ(group_->server_ports().size(), 2u);
  EXPECT_EQ(group_->master_name(), "dlockmaster");
  EXPECT_EQ(group_->SentinelUri(),
            absl::StrJoin(group_->sentinel_hosts(), ","));
  EXPECT_EQ(group_->sentinel_hosts()[0],
            absl::StrCat("127.0.0.1:", group_->sentinel_ports()[0]));

  const int master = group_->server_ports()[0];
  const int replica = group_->server_ports()[1];
  absl::StatusOr<int> current = group_->CurrentMasterPort();
  ASSERT_OK(current);
  EXPECT_EQ(*current, master);
  for (const std::string& reply : SentinelMasterReplies()) {
    EXPECT_EQ(reply, MasterAddrReply(master));
  }
  EXPECT_TRUE(Command(master, {"ROLE"}).starts_with("*3\r\n$6\r\nmaster\r\n"));
  EXPECT_TRUE(Command(replica, {"ROLE"}).starts_with("*5\r\n$5\r\nslave\r\n"));

  // The replica is in sync: a write reaches it.
  EXPECT_EQ(Command(master, {"SET", "k", "v"}), "+OK\r\n");
  absl::Status caught_up = group_->WaitUntilReplicaCaughtUp();
  ASSERT_OK(caught_up);
  EXPECT_EQ(Command(replica, {"GET", "k"}), Bulk("v"));
}

TEST_F(RedisSentinelGroupTest, FailoverMovesTheMasterAndASecondMovesItBack) {
  const int first = group_->server_ports()[0];
  const int second = group_->server_ports()[1];
  // Failover() waits for the replica to have it.
  ASSERT_EQ(Command(first, {"SET", "k", "v"}), "+OK\r\n");

  absl::Status moved = group_->Failover();
  ASSERT_OK(moved);
  EXPECT_EQ(*group_->CurrentMasterPort(), second);
  for (const std::string& reply : SentinelMasterReplies()) {
    EXPECT_EQ(reply, MasterAddrReply(second));
  }
  EXPECT_TRUE(Command(second, {"ROLE"}).starts_with("*3\r\n$6\r\nmaster\r\n"));
  // The old master follows the new one; the write made it across.
  EXPECT_TRUE(Command(first, {"ROLE"}).starts_with("*5\r\n$5\r\nslave\r\n"));
  EXPECT_EQ(Command(second, {"GET", "k"}), Bulk("v"));

  absl::Status back = group_->Failover();
  ASSERT_OK(back);
  EXPECT_EQ(*group_->CurrentMasterPort(), first);
  for (const std::string& reply : SentinelMasterReplies()) {
    EXPECT_EQ(reply, MasterAddrReply(first));
  }
  EXPECT_TRUE(Command(second, {"ROLE"}).starts_with("*5\r\n$5\r\nslave\r\n"));
  EXPECT_EQ(Command(first, {"GET", "k"}), Bulk("v"));
}

TEST_F(RedisSentinelGroupTest, FailoverLosingWritesLosesAnAcknowledgedWrite) {
  const int old_master = group_->server_ports()[0];
  // Written before: FailoverLosingWrites() waits for the replica to have it.
  ASSERT_EQ(Command(old_master, {"SET", "kept", "1"}), "+OK\r\n");

  absl::StatusOr<int> new_master =
      group_->FailoverLosingWrites([&]() -> absl::Status {
        // Acknowledged by the master, never sent to the paused replica.
        absl::StatusOr<std::string> reply =
            group_->RawCommand(old_master, {"SET", "lost", "1"});
        if (!reply.ok()) return reply.status();
        if (*reply != "+OK\r\n") return absl::InternalError(*reply);
        return absl::OkStatus();
      });
  ASSERT_OK(new_master);
  EXPECT_EQ(*new_master, OtherServer(old_master));
  for (const std::string& reply : SentinelMasterReplies()) {
    EXPECT_EQ(reply, MasterAddrReply(*new_master));
  }
  EXPECT_EQ(Command(*new_master, {"GET", "lost"}), "$-1\r\n");
  EXPECT_EQ(Command(*new_master, {"GET", "kept"}), Bulk("1"));

  // Restarted empty, the old master becomes the new one's replica: the
  // write is gone from the whole group.
  absl::Status restarted = group_->RestartKilled();
  ASSERT_OK(restarted);
  const std::string role = Command(old_master, {"ROLE"});
  EXPECT_TRUE(role.starts_with("*5\r\n$5\r\nslave\r\n")) << role;
  EXPECT_EQ(Command(old_master, {"GET", "lost"}), "$-1\r\n");
  EXPECT_EQ(Command(old_master, {"GET", "kept"}), Bulk("1"));
}

TEST_F(RedisSentinelGroupTest, PausedReplicaCatchesUpOnceResumed) {
  const int master = group_->server_ports()[0];
  const int replica = group_->server_ports()[1];
  ASSERT_OK(group_->PauseReplica());
  // The master dropped the link and goes on taking writes.
  EXPECT_NE(Command(master, {"INFO", "replication"}).find("connected_slaves:0"),
            std::string::npos);
  EXPECT_EQ(Command(master, {"SET", "late", "1"}), "+OK\r\n");
  ASSERT_OK(group_->ResumePaused());
  absl::Status settled = group_->WaitUntilSettled();
  ASSERT_OK(settled);
  absl::Status caught_up = group_->WaitUntilReplicaCaughtUp();
  ASSERT_OK(caught_up);
  EXPECT_EQ(Command(replica, {"GET", "late"}), Bulk("1"));
  EXPECT_EQ(*group_->CurrentMasterPort(), master);
}

}  // namespace
}  // namespace dlock
