// Redlock-specific behaviour the shared conformance suite cannot see: the
// quorum at Connect, the masters asked at once, token agreement across
// masters whose counters differ (a lock's token, an election's term, a
// read's), split votes, the admin calls on a lock's readers, the
// configurable drift, and URI errors.
// The fault histories are in tests/history/redlock_history_test.cc.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "fault_proxy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redis_server.h"
#include "status_testing.h"
#include "tests/redlock_test_util.h"

namespace dlock {
namespace {

using ::dlock::test::Direction;
using ::dlock::test::Fault;
using ::dlock::test::FaultProxy;
using ::dlock::test::RedisGroup;
using ::dlock::test::RedlockUri;
using ::dlock::test::StartGroup;
using ::dlock::test::StartProxies;
using ::testing::HasSubstr;

// The integer a raw RESP reply carries (":5\r\n" or "$1\r\n5\r\n"); -1 for
// a nil.
int64_t RespInteger(const std::string& resp) {
  if (absl::StartsWith(resp, "$-1")) return -1;
  const size_t start = resp[0] == '$' ? resp.find("\r\n") + 2 : 1;
  int64_t value = -1;
  EXPECT_TRUE(absl::SimpleAtoi(
      resp.substr(start, resp.find("\r\n", start) - start), &value))
      << resp;
  return value;
}

// Every case that starts masters runs on plain ones and on masters that
// take only TLS (redlocks://).
class Redlock : public ::testing::TestWithParam<bool> {};

INSTANTIATE_TEST_SUITE_P(Transports, Redlock, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Tls" : "Plain";
                         });

// A master's token floor (docs/redis.md, fencing over a quorum).
int64_t FloorOn(test::RedisServer& server, const std::string& ns) {
  absl::StatusOr<std::string> reply =
      server.RawCommand({"GET", absl::StrCat("dlock:", ns, ":floor")});
  EXPECT_OK(reply);
  return reply.ok() ? RespInteger(*reply) : -1;
}

// The token a master's copy of the lock carries: the seconds and
// microseconds after its value's "v4"; -1 when the master has no copy.
int64_t TokenOn(test::RedisServer& server, const std::string& key) {
  absl::StatusOr<std::string> reply = server.RawCommand(
      {"EVAL",
       "local v = redis.call('GET', KEYS[1]) if not v then return -1 end "
       "local sec, usec = string.match(v, '^v4 (%d+) (%d+) ') "
       "return tonumber(sec) * 1000000 + tonumber(usec)",
       "1", key});
  EXPECT_OK(reply);
  return reply.ok() ? RespInteger(*reply) : -1;
}

// Sets the token of a master's copy of the lock ("v4 <sec> <usec> ...",
// docs/redis.md; the times after it count from the token's ms, which
// moves by at most 1 ms here).
absl::Status SetTokenOn(test::RedisServer& server, const std::string& key,
                        uint64_t token) {
  return server
      .RawCommand({"EVAL",
                   "local v = redis.call('GET', KEYS[1]) "
                   "return redis.call('SET', KEYS[1], 'v4 ' .. ARGV[1] .. "
                   "string.match(v, '^v4 %d+ %d+( .*)$'), 'KEEPTTL')",
                   "1", key,
                   absl::StrCat(token / 1000000, " ", token % 1000000)})
      .status();
}

TEST_P(Redlock, ConnectsWithAQuorumAndSaysHowManyAnswerWithout) {
  std::unique_ptr<RedisGroup> group = StartGroup(3, GetParam());
  ASSERT_NE(group, nullptr);
  group->server(0).StopServer();
  // Two of three: a quorum, and the lock works.
  ASSERT_OK_AND_ASSIGN(auto client,
                       Connect(RedlockUri(*group, {}, "namespace=quorum")));
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("job"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->TryAcquire());
  EXPECT_OK(hold.Release());

  group->server(1).StopServer();
  absl::StatusOr<std::unique_ptr<LockClient>> none =
      Connect(RedlockUri(*group, {}, "namespace=quorum"));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(none.status().message(), HasSubstr("only 1 of 3"));
}

// The masters are asked at once: with two of three answering 300 ms late,
// an acquisition takes about 300 ms, not 600.
TEST_P(Redlock, AsksEveryMasterAtOnce) {
  std::unique_ptr<RedisGroup> group = StartGroup(3, GetParam());
  ASSERT_NE(group, nullptr);
  FaultProxy slow[2];
  const std::vector<int> ports = StartProxies(*group, slow);
  ASSERT_OK_AND_ASSIGN(
      auto client, Connect(RedlockUri(*group, ports, "namespace=parallel")));
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("job"));
  constexpr absl::Duration kDelay = absl::Milliseconds(300);
  for (FaultProxy& p : slow) {
    p.SetFault(Direction::kReplies, Fault::Delay(kDelay));
  }
  const absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(Hold hold,
                       lock->TryAcquire({.lease = absl::Seconds(10)}));
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, kDelay);
  EXPECT_LT(took, 2 * kDelay) << "the masters were asked one after another";
  for (FaultProxy& p : slow) p.SetFault(Direction::kReplies, Fault::Pass());
  EXPECT_OK(hold.Release());
}

// A master whose floor ran ahead (it granted while the others were away,
// or its clock is ahead) sets the token; the others are raised to it before
// the grant returns, so the next token exceeds it wherever the next quorum
// is.
// Far ahead of any server's clock in microseconds (2^52).
constexpr int64_t kAhead = int64_t{1} << 52;

// A client in namespace `ns` of masters whose master 0 has its floor one
// below kAhead: its grants there set the token the others are raised to.
absl::StatusOr<std::unique_ptr<LockClient>> ConnectWithAFloorAhead(
    RedisGroup& group, const std::string& ns) {
  absl::Status set =
      group.server(0)
          .RawCommand({"SET", absl::StrCat("dlock:", ns, ":floor"),
                       absl::StrCat(kAhead - 1)})
          .status();
  if (!set.ok()) return set;
  return Connect(RedlockUri(group, {}, absl::StrCat("namespace=", ns)));
}

TEST_P(Redlock, TokenIsTheQuorumsLargestAndIsWrittenBack) {
  std::unique_ptr<RedisGroup> group = StartGroup(3, GetParam());
  ASSERT_NE(group, nullptr);
  ASSERT_OK_AND_ASSIGN(auto client, ConnectWithAFloorAhead(*group, "tokens"));
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("job"));
  ASSERT_OK_AND_ASSIGN(Hold first, lock->TryAcquire());
  EXPECT_EQ(first.fencing_token(), static_cast<uint64_t>(kAhead));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(FloorOn(group->server(i), "tokens"), kAhead) << "master " << i;
    EXPECT_EQ(TokenOn(group->server(i), "dlock:{tokens:job}"), kAhead)
        << "master " << i;
  }
  ASSERT_OK_AND_ASSIGN(LockInfo info, client->Admin().Inspect("job"));
  EXPECT_EQ(info.fencing_token, static_cast<uint64_t>(kAhead));
  ASSERT_OK(first.Release());

  // Master 0 forgets everything (a restart without persistence): the two
  // others still know the token.
  ASSERT_OK(group->server(0).Restart());
  ASSERT_OK_AND_ASSIGN(Hold second, lock->Acquire({.wait = absl::Seconds(5)}));
  EXPECT_GT(second.fencing_token(), static_cast<uint64_t>(kAhead));
  EXPECT_OK(second.Release());
}

// A namespace whose tokens run ahead of the masters' clocks (a client with
// a fast clock proposed them) keeps its holders' liveness deadlines: a
// holder cut off from every master is taken over once its liveness TTL has
// passed, not once the masters' clocks reach its token. (The value counts
// its times from the token's ms; a deadline before it was clamped up to it,
// and the waiter was refused for the minute the token ran ahead.)
TEST_P(Redlock, ATokenAheadOfTheClocksKeepsTheLivenessDeadline) {
  std::unique_ptr<RedisGroup> group = StartGroup(3, GetParam());
  ASSERT_NE(group, nullptr);
  const int64_t ahead = absl::ToUnixMicros(absl::Now() + absl::Minutes(1));
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(group->server(i)
                  .RawCommand({"SET", "dlock:ahead:floor", absl::StrCat(ahead)})
                  .status());
  }
  FaultProxy cut[3];
  const std::vector<int> ports = StartProxies(*group, cut);
  const std::string query = "namespace=ahead&liveness_ttl=300ms";
  ASSERT_OK_AND_ASSIGN(auto holder, Connect(RedlockUri(*group, ports, query)));
  ASSERT_OK_AND_ASSIGN(auto other, Connect(RedlockUri(*group, {}, query)));
  ASSERT_OK_AND_ASSIGN(Hold held,
                       holder->TryAcquire("job", {.lease = absl::Minutes(1)}));
  EXPECT_GT(held.fencing_token(), static_cast<uint64_t>(ahead));
  for (FaultProxy& p : cut) ASSERT_OK(p.Partition());
  // Generous: the takeover is due about 300 ms after the last refresh.
  absl::StatusOr<Hold> taken =
      other->Acquire("job", {.wait = absl::Seconds(10)});
  ASSERT_OK(taken.status());
  EXPECT_GT(taken->fencing_token(), held.fencing_token());
  for (FaultProxy& p : cut) ASSERT_OK(p.Heal());
  EXPECT_OK(taken->Release());
}

// A conditional force unlock counts what it removed: masters whose copy of
// the hold carries another token (counters that disagreed at the grant)
// still hold it for the owner, so removing the token from fewer than a
// quorum must not be reported as done.
TEST_P(Redlock, ForceUnlockOnATokenHeldByTooFewMastersIsNotDone) {
  std::unique_ptr<RedisGroup> group = StartGroup(3, GetParam());
  ASSERT_NE(group, nullptr);
  ASSERT_OK_AND_ASSIGN(auto client,
                       Connect(RedlockUri(*group, {}, "namespace=split")));
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("job"));
  ASSERT_OK_AND_ASSIGN(Hold hold,
                       lock->TryAcquire({.lease = absl::Minutes(1)}));
  const uint64_t token = hold.fencing_token();
  for (int i : {1, 2}) {
    ASSERT_OK(SetTokenOn(group->server(i), "dlock:{split:job}", token - 1));
  }
  const absl::Status forced = client->Admin().ForceUnlock("job", token);
  EXPECT_FALSE(forced.ok());
  EXPECT_THAT(forced.message(), HasSubstr("quorum"));
  // The owner still holds it on masters 1 and 2: a quorum.
  EXPECT_OK(hold.Renew());
  EXPECT_OK(hold.Release());
}

// drift_factor makes the client stop believing earlier: with half the lease
// as drift, a 2 s hold is believed for about 1 s.
TEST_P(Redlock, ConfiguredDriftShortensTheValidity) {
  std::unique_ptr<RedisGroup> group = StartGroup(3, GetParam());
  ASSERT_NE(group, nullptr);
  ASSERT_OK_AND_ASSIGN(
      auto client,
      Connect(RedlockUri(*group, {}, "namespace=drift&drift_factor=0.45")));
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("job"));
  const absl::Time start = absl::Now();
  // A set lease is not renewed.
  ASSERT_OK_AND_ASSIGN(Hold hold,
                       lock->TryAcquire({.lease = absl::Seconds(2)}));
  EXPECT_FALSE(hold.lost());
  absl::SleepFor(absl::Milliseconds(1300) - (absl::Now() - start));
  EXPECT_TRUE(hold.lost()) << "still believed past lease - elapsed - 45% drift";
}

// A round that fails gives back only what it added: a re-entry of a hold
// taken by another client under the same owner token (C6) leaves that hold
// in place. (Taking off every hold of the owner handed the lock to a third
// owner while the first still believed it.)
TEST_P(Redlock, FailedReentryElsewhereKeepsTheHold) {
  std::unique_ptr<RedisGroup> group = StartGroup(3, GetParam());
  ASSERT_NE(group, nullptr);
  ASSERT_OK_AND_ASSIGN(auto first_client,
                       Connect(RedlockUri(*group, {}, "namespace=review")));
  ASSERT_OK_AND_ASSIGN(
      auto late_client,
      Connect(RedlockUri(*group, {}, "namespace=review&drift_floor=100s")));
  ASSERT_OK_AND_ASSIGN(auto third_client,
                       Connect(RedlockUri(*group, {}, "namespace=review")));
  ASSERT_OK_AND_ASSIGN(auto first, first_client->GetLock("job"));
  ASSERT_OK_AND_ASSIGN(auto late, late_client->GetLock("job"));
  ASSERT_OK_AND_ASSIGN(auto third, third_client->GetLock("job"));
  AcquireOptions as_job;
  as_job.owner_token = "job-42";
  as_job.wait = absl::ZeroDuration();
  as_job.lease = absl::Seconds(30);
  ASSERT_OK_AND_ASSIGN(Hold held, first->Acquire(as_job));
  absl::StatusOr<Hold> reentry = late->Acquire(as_job);
  EXPECT_FALSE(reentry.ok());
  EXPECT_FALSE(held.lost());
  // The first client still believes its hold; nobody else may get it.
  absl::StatusOr<Hold> stolen = third->TryAcquire();
  EXPECT_FALSE(stolen.ok()) << "two owners: the first client believes "
                               "job-42 holds the lock, and a third took it";
  EXPECT_FALSE(held.lost());
}

// A round waits one operation_timeout in all for masters that do not
// answer, not one per master.
TEST_P(Redlock, SilentMastersCostOneTimeoutPerRound) {
  std::unique_ptr<RedisGroup> group = StartGroup(5, GetParam());
  ASSERT_NE(group, nullptr);
  FaultProxy silent[2];
  const std::vector<int> ports = StartProxies(*group, silent);
  ASSERT_OK_AND_ASSIGN(
      auto client,
      Connect(RedlockUri(*group, ports,
                         "namespace=silent&operation_timeout=300ms")));
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("job"));
  for (FaultProxy& p : silent) p.SetFault(Direction::kReplies, Fault::Stall());
  const absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(Hold hold,
                       lock->TryAcquire({.lease = absl::Seconds(10)}));
  const absl::Duration took = absl::Now() - start;
  EXPECT_LT(took, absl::Milliseconds(550))
      << "each silent master cost a timeout of its own";
  EXPECT_OK(hold.Release());
}

// Two masters of three hold leftovers of two different owners (each a
// minority): nobody holds the lock, so a TryAcquire must not answer that
// another owner does. It runs again after a random delay, as racing
// callers that split a vote must, and gets the lock once they expire.
// (Counting every refusal alike reported the lock held, and racing
// TryAcquires could all lose a free lock.)
TEST_P(Redlock, SplitVoteIsNotReportedAsHeld) {
  std::unique_ptr<RedisGroup> group = StartGroup(3, GetParam());
  ASSERT_NE(group, nullptr);
  ASSERT_OK_AND_ASSIGN(
      auto client,
      Connect(RedlockUri(*group, {}, "namespace=split&retry_delay=200ms")));
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("job"));
  for (int i = 0; i < 2; ++i) {
    // token 1, one hold, lease 30 ms, no liveness (docs/redis.md, keys).
    ASSERT_OK(group->server(i)
                  .RawCommand({"SET", "dlock:{split:job}",
                               absl::StrCat("v4 0 1 1 30 0 0 -1 0 other-", i),
                               "PX", "30"})
                  .status());
  }
  absl::StatusOr<Hold> hold = lock->TryAcquire();
  ASSERT_OK(hold.status());
  EXPECT_EQ(hold->hold_count(), 1);
  EXPECT_OK(hold->Release());
}

// The term of an election's leader on a master (its entry's first number;
// docs/redis.md, semaphores and elections); -1 when the master has none.
int64_t TermOn(test::RedisServer& server, const std::string& key) {
  absl::StatusOr<std::string> reply = server.RawCommand(
      {"EVAL",
       "local f = redis.call('HGETALL', KEYS[1]) "
       "for i = 1, #f, 2 do if string.sub(f[i], 2, 2) == ':' then "
       "return tonumber(string.match(f[i + 1], '^(%d+) ')) end end "
       "return -1",
       "1", key});
  EXPECT_OK(reply);
  return reply.ok() ? RespInteger(*reply) : -1;
}

// An election's term is agreed as a lock's token: a master whose floor ran
// ahead sets it, and the others are raised to it (holder_raise_token)
// before the campaign returns, so that a proclaim, conditional on the term,
// reaches a quorum, and the next term exceeds it wherever its quorum is.
TEST_P(Redlock, ElectionTermIsTheQuorumsLargestAndIsWrittenBack) {
  std::unique_ptr<RedisGroup> group = StartGroup(3, GetParam());
  ASSERT_NE(group, nullptr);
  ASSERT_OK_AND_ASSIGN(auto client, ConnectWithAFloorAhead(*group, "terms"));
  ASSERT_OK_AND_ASSIGN(auto election, client->GetElection("leader"));
  ASSERT_OK_AND_ASSIGN(Leadership first, election->Campaign("a"));
  EXPECT_EQ(first.term(), static_cast<uint64_t>(kAhead));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(FloorOn(group->server(i), "terms"), kAhead) << "master " << i;
    EXPECT_EQ(TermOn(group->server(i), "dlock:e{terms:leader}"), kAhead)
        << "master " << i;
  }
  ASSERT_OK(first.Proclaim("b"));
  ASSERT_OK_AND_ASSIGN(LeaderInfo info, election->Leader());
  EXPECT_EQ(info.term, static_cast<uint64_t>(kAhead));
  EXPECT_EQ(info.value, "b");
  ASSERT_OK(first.Resign());

  ASSERT_OK(group->server(0).Restart());
  ASSERT_OK_AND_ASSIGN(Leadership second,
                       election->Campaign("c", {.wait = absl::Seconds(5)}));
  EXPECT_GT(second.term(), static_cast<uint64_t>(kAhead));
  EXPECT_OK(second.Resign());
}

// Two masters of three hold leaders of two other owners, each a minority
// (campaigners that split a vote): nobody leads, so a campaign that does
// not wait is not told that another does; it runs again after a random
// delay and wins once they lapse. (A refusal that did not name the leader
// there counted both as one holder with a quorum.)
TEST_P(Redlock, ElectionSplitVoteIsNotReportedAsLed) {
  std::unique_ptr<RedisGroup> group = StartGroup(3, GetParam());
  ASSERT_NE(group, nullptr);
  ASSERT_OK_AND_ASSIGN(
      auto client,
      Connect(RedlockUri(*group, {}, "namespace=split&retry_delay=200ms")));
  ASSERT_OK_AND_ASSIGN(auto election, client->GetElection("leader"));
  for (int i = 0; i < 2; ++i) {
    // Token 1, one hold, lease 30 ms from the server's now, no liveness.
    ASSERT_OK(
        group->server(i)
            .RawCommand({"EVAL",
                         "local t = redis.call('TIME') "
                         "local ms = t[1] * 1000 + math.floor(t[2] / 1000) "
                         "redis.call('HSET', KEYS[1], ARGV[1], "
                         "string.format('1 1 1 30 %d %d -1 0', ms, ms + 30)) "
                         "return redis.call('PEXPIRE', KEYS[1], 30)",
                         "1", "dlock:e{split:leader}",
                         absl::StrCat("c:other-", i)})
            .status());
  }
  absl::StatusOr<Leadership> me =
      election->Campaign("me", {.wait = absl::ZeroDuration()});
  ASSERT_OK(me.status());
  EXPECT_OK(me->Resign());
}

// A read's token is agreed as a lock's: a master whose floor ran ahead
// sets it, the others' entries in the readers' hash and their floors are
// raised to it before the read returns, and the next writer's quorum,
// which shares a master with the read's, grants a larger token. The
// writer's own read carries the writer's token (C23).
TEST_P(Redlock, ReadTokenIsTheQuorumsLargestAndTheNextWritersExceedsIt) {
  std::unique_ptr<RedisGroup> group = StartGroup(3, GetParam());
  ASSERT_NE(group, nullptr);
  ASSERT_OK_AND_ASSIGN(auto client, ConnectWithAFloorAhead(*group, "reads"));
  ASSERT_OK_AND_ASSIGN(auto rw, client->GetReadWriteLock("doc"));
  ASSERT_OK_AND_ASSIGN(Hold read, rw->TryAcquireRead());
  EXPECT_EQ(read.fencing_token(), static_cast<uint64_t>(kAhead));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(FloorOn(group->server(i), "reads"), kAhead) << "master " << i;
    EXPECT_EQ(TermOn(group->server(i), "dlock:r{reads:doc}"), kAhead)
        << "master " << i;
  }
  ASSERT_OK_AND_ASSIGN(ObjectInfo info, rw->Inspect());
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_TRUE(info.holders[0].shared);
  EXPECT_EQ(info.holders[0].fencing_token, static_cast<uint64_t>(kAhead));
  ASSERT_OK(read.Release());

  ASSERT_OK_AND_ASSIGN(Hold write, rw->TryAcquireWrite());
  EXPECT_GT(write.fencing_token(), static_cast<uint64_t>(kAhead));
  ASSERT_OK_AND_ASSIGN(Hold own_read, rw->TryAcquireRead());
  EXPECT_EQ(own_read.fencing_token(), write.fencing_token());
  EXPECT_OK(own_read.Release());
  EXPECT_OK(write.Release());
}

// A reader held by a quorum keeps writers out; the admin calls see it as a
// quorum does (listed, with its token), and a force unlock on its token,
// which is not the writer's, removes it from every master so that a writer
// gets in.
TEST_P(Redlock, AReaderIsListedAndForcedOffByItsToken) {
  std::unique_ptr<RedisGroup> group = StartGroup(3, GetParam());
  ASSERT_NE(group, nullptr);
  const std::string uri = RedlockUri(*group, {}, "namespace=readers");
  ASSERT_OK_AND_ASSIGN(auto reader, Connect(uri));
  ASSERT_OK_AND_ASSIGN(auto writer, Connect(uri));
  ASSERT_OK_AND_ASSIGN(auto rw, reader->GetReadWriteLock("doc"));
  ASSERT_OK_AND_ASSIGN(auto write_rw, writer->GetReadWriteLock("doc"));
  ASSERT_OK_AND_ASSIGN(Hold read,
                       rw->TryAcquireRead({.lease = absl::Minutes(1)}));
  EXPECT_TRUE(IsHeldByAnother(write_rw->TryAcquireWrite().status()));
  ASSERT_OK_AND_ASSIGN(std::vector<ObjectInfo> listed,
                       writer->Admin().ListObjects(ObjectKind::kLock));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].name, "doc");
  ASSERT_EQ(listed[0].holders.size(), 1u);
  EXPECT_TRUE(listed[0].holders[0].shared);
  EXPECT_EQ(listed[0].holders[0].fencing_token, read.fencing_token());
  ASSERT_OK(writer->Admin().ForceUnlockObject(ObjectKind::kLock, "doc",
                                              read.fencing_token()));
  ASSERT_OK_AND_ASSIGN(Hold write, write_rw->TryAcquireWrite());
  EXPECT_GT(write.fencing_token(), read.fencing_token());
  EXPECT_OK(write.Release());
}

TEST(RedlockUris, ErrorsSayWhatToFix) {
  const struct {
    std::string uri;
    std::string says;
  } cases[] = {
      {"redlock://127.0.0.1:1,127.0.0.1:2", "3 to 15 hosts"},
      {"redlock://a:1,b:2,c:3?drift_factor=0.7", "drift_factor"},
      {"redlock://a:1,b:2,c:3?drift_floor=soon", "drift_floor"},
      {"redlock://a:1,b:2,c:3?quorum=1", "quorum"},
      // One server counted twice would make a quorum of fewer servers.
      {"redlock://a:1,b:2,a:1", "names a:1 twice"},
      {"redlock://a,b:2,A:6379", "names A:6379 twice"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(c.uri);
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument)
        << c.uri;
    EXPECT_THAT(client.status().message(), HasSubstr(c.says)) << c.uri;
  }
}

}  // namespace
}  // namespace dlock
