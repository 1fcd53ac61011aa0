// The key layout (docs/redis.md, keys): every lock is one key in one hash
// slot, whatever its name, and no script touches a key of another slot
// (proved on a Redis Cluster node, which refuses such scripts); and the
// rolling upgrade from 0.2 (docs/migration.md), with 0.2's own scripts
// running beside this layout on one server.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redis_lock_ops.h"
#include "redis_server.h"
#include "status_testing.h"
#include "tests/v0_2_scripts.h"

namespace dlock {
namespace {

using ::dlock::redis::KeySlot;
using ::dlock::redis::Keyspace;
using ::dlock::test::RedisServer;
using ::testing::HasSubstr;

// Names a layout must keep apart and in one slot each: braces anywhere,
// an empty tag, glob characters, non-Latin letters.
const std::vector<std::string>& AwkwardNames() {
  static const auto* names = new std::vector<std::string>{
      "plain", "a}b", "{x}",       "x{y}z",        "{}",   "}{",
      "{",     "}",   "a{b{c}d}e", "report/2024*", "名前", "with space"};
  return *names;
}

std::unique_ptr<RedisServer> StartClusterNode() {
  absl::StatusOr<std::unique_ptr<RedisServer>> server =
      RedisServer::Start({.cluster_enabled = true});
  EXPECT_OK(server);
  return server.ok() ? *std::move(server) : nullptr;
}

int ServerKeySlot(RedisServer& server, const std::string& key) {
  absl::StatusOr<std::string> reply =
      server.RawCommand({"CLUSTER", "KEYSLOT", key});
  EXPECT_OK(reply);
  int slot = -1;
  EXPECT_TRUE(reply.ok() && reply->size() > 3 &&
              absl::SimpleAtoi(reply->substr(1, reply->size() - 3), &slot))
      << (reply.ok() ? *reply : "");
  return slot;
}

TEST(RedisLayout, KeySlotIsTheServers) {
  std::unique_ptr<RedisServer> node = StartClusterNode();
  ASSERT_NE(node, nullptr);
  const Keyspace keys("layout", 0);
  std::vector<std::string> all = {"", "{", "{}", "a{}b", "{a}", "foo{bar}baz"};
  for (const std::string& name : AwkwardNames()) {
    all.push_back(keys.LockKey(name));
    all.push_back(name);
  }
  for (const std::string& key : all) {
    EXPECT_EQ(KeySlot(key), ServerKeySlot(*node, key)) << key;
  }
}

TEST(RedisLayout, EveryLockIsOneKeyInASlotOfItsOwnName) {
  const Keyspace keys("layout", 0);
  for (const std::string& name : AwkwardNames()) {
    const std::string key = keys.LockKey(name);
    // The tag runs from the '{' after "dlock:" to the first '}': the whole
    // "<ns>:<name>" unless the name holds a '}', where it ends there.
    const std::string tagged = absl::StrCat("layout:", name);
    const std::string tag = tagged.substr(0, tagged.find('}'));
    EXPECT_EQ(KeySlot(key), KeySlot(absl::StrCat("{", tag, "}"))) << key;
  }
  // Two names whose tags differ map by their own names, not the namespace.
  EXPECT_NE(KeySlot(keys.LockKey("a")), KeySlot(keys.LockKey("b")));
}

// Every operation, on every awkward name, runs on a node in cluster mode
// (no SELECT, the cluster's command set). Not a proof that the scripts
// touch only declared keys: a node that serves every slot lets a script
// read any key it serves, declared or not (Redis 7.0 refuses only a key
// another master serves); redis_cluster_test's
// AnUndeclaredKeyIsRefusedAndNoneOfOursIs proves that across masters.
TEST(RedisLayout, EveryOperationRunsOnAClusterNode) {
  std::unique_ptr<RedisServer> node = StartClusterNode();
  ASSERT_NE(node, nullptr);
  ASSERT_OK(
      node->RawCommand({"CLUSTER", "ADDSLOTSRANGE", "0", "16383"}).status());
  // The node serves once it counts its slots covered (cluster_state:ok,
  // about two seconds after it starts).
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    absl::StatusOr<std::string> state = node->RawCommand({"CLUSTER", "INFO"});
    if (state.ok() && absl::StrContains(*state, "cluster_state:ok")) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<LockClient> client,
      Connect(absl::StrCat(node->Uri("cluster"), "&liveness_ttl=300ms")));
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<LockClient> other,
      Connect(absl::StrCat(node->Uri("cluster"), "&liveness_ttl=300ms")));
  for (const std::string& name : AwkwardNames()) {
    SCOPED_TRACE(name);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> lock,
                         client->GetLock(name));
    ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire({.lease = absl::Minutes(1)}));
    ASSERT_OK_AND_ASSIGN(Hold again,
                         lock->Acquire({.lease = absl::Minutes(2)}));
    EXPECT_EQ(again.hold_count(), 2);
    EXPECT_OK(hold.Renew());
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> theirs,
                         other->GetLock(name));
    // Refused, and marked for a wake-up: the waiter's path.
    EXPECT_EQ(theirs->Acquire({.wait = absl::Milliseconds(50)}).status().code(),
              absl::StatusCode::kDeadlineExceeded);
    ASSERT_OK_AND_ASSIGN(LockInfo info, client->Admin().Inspect(name));
    EXPECT_EQ(info.hold_count, 2);
    EXPECT_EQ(info.holder_live, std::optional<bool>(true));
    EXPECT_OK(again.Release());
    EXPECT_OK(hold.ReleaseAndKeepFor(absl::Milliseconds(100)));
    EXPECT_OK(client->Admin().ForceUnlock(name));
    ASSERT_OK_AND_ASSIGN(Hold next, theirs->TryAcquire());
    EXPECT_OK(client->Admin().ForceUnlock(name, next.fencing_token()));
  }
  // The heartbeat ran meanwhile (ttl/3 = 100 ms) on held locks too.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> lock,
                       client->GetLock("{held}"));
  ASSERT_OK_AND_ASSIGN(Hold held, lock->Acquire({.lease = absl::Minutes(1)}));
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(held.state(), LockState::kHeld);
  ASSERT_OK_AND_ASSIGN(std::vector<LockInfo> listed, client->Admin().List(""));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].name, "{held}");
  EXPECT_OK(held.Release());
}

// A 0.2 client's acquire of `name` in namespace `ns`, run with 0.2's own
// script and keys: {1, token, holds}, {0, ...}, or an error.
absl::StatusOr<std::string> OldAcquire(RedisServer& server,
                                       const std::string& ns,
                                       const std::string& name) {
  return server.RawCommand({"EVAL", redis::v0_2::kAcquire, "3",
                            absl::StrCat("dlock:", ns, ":l:", name),
                            absl::StrCat("dlock:", ns, ":fence"),
                            absl::StrCat("dlock:", ns, ":live:old"),
                            "old-owner", "60000", "0", "10000"});
}

absl::StatusOr<std::string> OldRelease(RedisServer& server,
                                       const std::string& ns,
                                       const std::string& name) {
  return server.RawCommand(
      {"EVAL", redis::v0_2::kRelease, "1",
       absl::StrCat("dlock:", ns, ":l:", name), "old-owner", "1",
       absl::StrCat("dlock:0:", ns, ":released"), name, "0"});
}

TEST(RedisLayout, ThisLayoutRefusesToRunBesideHeldZeroTwoLocks) {
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start();
  ASSERT_OK(server.status());
  // A 0.2 client holds "job".
  ASSERT_OK_AND_ASSIGN(std::string granted,
                       OldAcquire(**server, "mixed", "job"));
  ASSERT_THAT(granted, ::testing::StartsWith("*3\r\n:1\r\n"));
  absl::StatusOr<std::unique_ptr<LockClient>> refused =
      Connect((*server)->Uri("mixed"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("dlock 0.2"));
  EXPECT_THAT(refused.status().message(), HasSubstr("docs/migration.md"));
  // From now on 0.2 can take no lock there: never granted beside us.
  ASSERT_OK_AND_ASSIGN(std::string other,
                       OldAcquire(**server, "mixed", "other"));
  EXPECT_THAT(other, ::testing::StartsWith("-"));
  EXPECT_THAT(other, HasSubstr("not an integer"));
  // Still refused while the 0.2 lock is held.
  EXPECT_EQ(Connect((*server)->Uri("mixed")).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Its release ends the wait: this layout connects and takes the lock.
  ASSERT_OK_AND_ASSIGN(std::string released,
                       OldRelease(**server, "mixed", "job"));
  EXPECT_EQ(released, ":0\r\n");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> client,
                       Connect((*server)->Uri("mixed")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> lock,
                       client->GetLock("job"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->TryAcquire());
  EXPECT_OK(hold.Release());
}

TEST(RedisLayout, ZeroTwoClientsStartingLaterAreNeverGranted) {
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start();
  ASSERT_OK(server.status());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> client,
                       Connect((*server)->Uri("later")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> lock,
                       client->GetLock("job"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->TryAcquire());
  // A 0.2 client started after this one: refused on the lock held here and
  // on a free one alike, with an error rather than a grant.
  for (const char* name : {"job", "free"}) {
    ASSERT_OK_AND_ASSIGN(std::string reply,
                         OldAcquire(**server, "later", name));
    EXPECT_THAT(reply, ::testing::StartsWith("-")) << name;
  }
  // A namespace this layout never used is 0.2's alone, untouched.
  ASSERT_OK_AND_ASSIGN(std::string elsewhere,
                       OldAcquire(**server, "elsewhere", "job"));
  EXPECT_THAT(elsewhere, ::testing::StartsWith("*3\r\n:1\r\n"));
  EXPECT_OK(hold.Release());
}

}  // namespace
}  // namespace dlock
