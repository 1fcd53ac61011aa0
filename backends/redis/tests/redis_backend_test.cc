// Redis-specific behaviour the shared conformance suite cannot see: AUTH and
// ACL users, SELECT, the script cache, the key layout (nothing left behind),
// what a pair costs the server, one subscription per client, and URI errors.
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redis_lock_ops.h"
#include "redis_master.h"
#include "redis_scripts.h"
#include "redis_server.h"
#include "redis_subscriber.h"
#include "status_testing.h"

namespace dlock {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::unique_ptr<test::RedisServer> StartOrDie(
    const test::RedisServer::Options& options = {}) {
  absl::StatusOr<std::unique_ptr<test::RedisServer>> server =
      test::RedisServer::Start(options);
  EXPECT_OK(server);
  return server.ok() ? *std::move(server) : nullptr;
}

std::unique_ptr<LockClient> ConnectOrDie(const std::string& uri,
                                         const ClientOptions& options = {}) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri, options);
  EXPECT_OK(client);
  return client.ok() ? *std::move(client) : nullptr;
}

// Acquires and releases one lock through `client`.
void LockOnce(LockClient& client, const std::string& name) {
  absl::StatusOr<std::unique_ptr<DistributedLock>> lock = client.GetLock(name);
  ASSERT_OK(lock);
  absl::StatusOr<Hold> hold = (*lock)->Acquire({.wait = absl::Seconds(5)});
  ASSERT_OK(hold);
  ASSERT_OK(hold->Release());
}

TEST(RedisBackend, PasswordAuthWorksAndNeverShowsThePassword) {
  auto server = StartOrDie({.requirepass = "s3cret-pw"});
  ASSERT_NE(server, nullptr);
  const std::string base = absl::StrCat("127.0.0.1:", server->port());
  auto client = ConnectOrDie(absl::StrCat("redis://:s3cret-pw@", base));
  ASSERT_NE(client, nullptr);
  LockOnce(*client, "auth");
  EXPECT_THAT(client->endpoint(), Not(HasSubstr("s3cret-pw")));
  EXPECT_THAT(client->endpoint(), HasSubstr("***"));

  absl::StatusOr<std::unique_ptr<LockClient>> wrong =
      Connect(absl::StrCat("redis://:not-the-pw@", base));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(wrong.status().message(), Not(HasSubstr("not-the-pw")));

  absl::StatusOr<std::unique_ptr<LockClient>> none =
      Connect(absl::StrCat("redis://", base));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated)
      << none.status();
}

TEST(RedisBackend, AclUserAndPassword) {
  auto server = StartOrDie({.acl_user = "locker", .acl_password = "acl-pw"});
  ASSERT_NE(server, nullptr);
  auto client = ConnectOrDie(
      absl::StrCat("redis://locker:acl-pw@127.0.0.1:", server->port()));
  ASSERT_NE(client, nullptr);
  LockOnce(*client, "acl");
  absl::StatusOr<std::unique_ptr<LockClient>> wrong = Connect(
      absl::StrCat("redis://locker:nope-pw@127.0.0.1:", server->port()));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(wrong.status().message(), Not(HasSubstr("nope-pw")));
}

TEST(RedisBackend, DatabasesAreSeparate) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  const std::string base = absl::StrCat("redis://127.0.0.1:", server->port());
  auto db1 = ConnectOrDie(base + "/1");
  auto db2 = ConnectOrDie(base + "/2");
  ASSERT_TRUE(db1 && db2);
  auto l1 = db1->GetLock("same-name");
  auto l2 = db2->GetLock("same-name");
  ASSERT_OK(l1);
  ASSERT_OK(l2);
  absl::StatusOr<Hold> in_db1 = (*l1)->TryAcquire();
  ASSERT_OK(in_db1);
  absl::StatusOr<Hold> in_db2 = (*l2)->TryAcquire();
  EXPECT_OK(in_db2) << "db 2 must not see db 1's lock";
  EXPECT_EQ(*server->RawCommand({"DBSIZE"}), ":0\r\n");  // db 0 untouched
}

TEST(RedisBackend, SurvivesAFlushedScriptCache) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  auto client = ConnectOrDie(server->Uri("scripts"));
  ASSERT_NE(client, nullptr);
  LockOnce(*client, "before");
  ASSERT_EQ(*server->RawCommand({"SCRIPT", "FLUSH"}), "+OK\r\n");
  LockOnce(*client, "after");
  // The library gone too (a restart without persistence): the call finds
  // no function, loads the library again and sends the body meanwhile.
  ASSERT_EQ(*server->RawCommand({"FUNCTION", "FLUSH"}), "+OK\r\n");
  LockOnce(*client, "without functions");
  EXPECT_THAT(*server->RawCommand({"FUNCTION", "LIST"}),
              ::testing::HasSubstr(absl::StrCat(redis::kLibrary, "_acquire")));
}

// An ACL that denies FUNCTION (a managed service's user may lack it): the
// client caches its scripts and calls them with EVALSHA instead of FCALL.
TEST(RedisBackend, RunsWhereFunctionsAreNotAllowed) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(*server->RawCommand({"ACL", "SETUSER", "nofn", "on", ">nofn-pw",
                                 "~*", "&*", "+@all", "-function", "-fcall"}),
            "+OK\r\n");
  auto client = ConnectOrDie(absl::StrCat(
      "redis://nofn:nofn-pw@127.0.0.1:", server->port(), "?namespace=acl"));
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(*server->RawCommand({"CONFIG", "RESETSTAT"}), "+OK\r\n");
  LockOnce(*client, "scripts");
  const std::string stats = *server->RawCommand({"INFO", "commandstats"});
  EXPECT_THAT(stats, HasSubstr("cmdstat_evalsha:calls=2,"));
  EXPECT_THAT(stats, Not(HasSubstr("cmdstat_fcall:")));
}

TEST(RedisBackend, LeavesOnlyTheLayoutMarkBehind) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  // Liveness lives in each lock's own key (docs/redis.md): no key of the
  // client's outlives its locks, whatever its TTL.
  const std::string uri = server->Uri("layout");
  auto client = ConnectOrDie(absl::StrCat(
      uri, absl::StrContains(uri, '?') ? "&" : "?", "liveness_ttl=300ms"));
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 1000; ++i) LockOnce(*client, absl::StrCat("name-", i));
  // One mark per namespace (the rolling upgrade's, docs/migration.md),
  // whatever the number of names used; tokens need no counter (C8).
  EXPECT_EQ(*server->RawCommand({"DBSIZE"}), ":1\r\n");
  EXPECT_EQ(*server->RawCommand({"GET", "dlock:layout:fence"}),
            "$36\r\ndlock-v3 layout; no 0.2 locks remain\r\n");
}

// A semaphore's and an election's hash lives only while something holds
// or waits (docs/redis.md, semaphores and elections): a waiter that gives
// up takes its place with it, and the last release deletes the hash.
TEST(RedisBackend, SemaphoresAndElectionsLeaveNoKeyBehind) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  auto holder = ConnectOrDie(server->Uri("objects"));
  auto waiter = ConnectOrDie(server->Uri("objects"));
  ASSERT_NE(holder, nullptr);
  ASSERT_NE(waiter, nullptr);
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetSemaphore("pool", 2));
  ASSERT_OK_AND_ASSIGN(auto wanted, waiter->GetSemaphore("pool", 2));
  ASSERT_OK_AND_ASSIGN(Permit both, held->Acquire(2, {}));
  AcquireOptions brief;
  brief.wait = absl::Milliseconds(200);
  EXPECT_EQ(wanted->Acquire(1, brief).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(*server->RawCommand({"HEXISTS", "dlock:s{objects:pool}", "q"}),
            ":0\r\n")
      << "the waiter that gave up left its place";
  ASSERT_OK_AND_ASSIGN(auto election, holder->GetElection("leader"));
  ASSERT_OK_AND_ASSIGN(Leadership leading, election->Campaign("host-a"));
  EXPECT_EQ(*server->RawCommand({"HGET", "dlock:e{objects:leader}", "v"}),
            "$6\r\nhost-a\r\n");
  EXPECT_OK(both.Release());
  EXPECT_OK(leading.Resign());
  EXPECT_EQ(*server->RawCommand({"DBSIZE"}), ":1\r\n")
      << "only the layout mark should be left";
}

// While readers hold, the lock's key is a marker a writer's SET NX fails on
// (owner '', hold count 1: read-held); a writer that reads too and releases
// its write keeps its read (a downgrade), even when it reads through
// another client under an owner token, which no core can see; a force
// unlock takes the readers along, and nothing outlives the holds.
TEST(RedisBackend, ReadersKeepAMarkerInTheLocksKeyAndLeaveNoKeyBehind) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  auto writing = ConnectOrDie(server->Uri("rw"));
  auto reading = ConnectOrDie(server->Uri("rw"));
  auto other = ConnectOrDie(server->Uri("rw"));
  ASSERT_NE(writing, nullptr);
  ASSERT_NE(reading, nullptr);
  ASSERT_NE(other, nullptr);
  AcquireOptions job;
  job.owner_token = "job-7";
  job.wait = absl::Seconds(5);
  ASSERT_OK_AND_ASSIGN(auto lock, writing->GetLock("doc"));
  ASSERT_OK_AND_ASSIGN(auto rw, reading->GetReadWriteLock("doc"));
  ASSERT_OK_AND_ASSIGN(auto other_rw, other->GetReadWriteLock("doc"));
  ASSERT_OK_AND_ASSIGN(Hold write, lock->Acquire(job));
  ASSERT_OK_AND_ASSIGN(Hold read, rw->AcquireRead(job));
  EXPECT_EQ(read.fencing_token(), write.fencing_token());
  EXPECT_OK(write.Release());
  absl::StatusOr<std::string> marker =
      server->RawCommand({"GET", "dlock:{rw:doc}"});
  ASSERT_OK(marker);
  // v4 <sec> <usec> <holds 1> <lease 0> <since> <expires> <alive -1> <waited>
  // and the empty owner.
  EXPECT_TRUE(std::regex_match(
      *marker, std::regex(R"(\$\d+\r\nv4 \d+ \d+ 1 0 -?\d+ -?\d+ -1 0 \r\n)")))
      << *marker << ": the writer's release left no read-held marker";
  EXPECT_EQ(other_rw->TryAcquireWrite({}).status().code(),
            absl::StatusCode::kDeadlineExceeded)
      << "a writer came in beside the downgraded read";
  ASSERT_OK_AND_ASSIGN(Hold shared, other_rw->TryAcquireRead({}));
  ASSERT_OK_AND_ASSIGN(ObjectInfo info, other_rw->Inspect());
  EXPECT_EQ(info.holders.size(), 2u);
  ASSERT_OK_AND_ASSIGN(std::vector<ObjectInfo> listed,
                       other->Admin().ListObjects(ObjectKind::kLock, "do"));
  EXPECT_EQ(listed.size(), 1u) << "a read-held lock is listed";
  EXPECT_OK(other->Admin().ForceUnlock("doc"));
  EXPECT_EQ(*server->RawCommand({"DBSIZE"}), ":1\r\n")
      << "the readers outlived the force unlock";
  EXPECT_FALSE(shared.Release().ok());
  EXPECT_FALSE(read.Release().ok());
}

// The space-separated fields of a bulk string reply ("$N\r\n<text>\r\n").
std::vector<std::string> FieldsOf(const absl::StatusOr<std::string>& reply) {
  EXPECT_OK(reply);
  if (!reply.ok()) return {};
  const size_t start = reply->find("\r\n");
  const size_t end = reply->rfind("\r\n");
  if (start == std::string::npos || end <= start) return {};
  return absl::StrSplit(reply->substr(start + 2, end - start - 2), ' ');
}

// A lock value's liveness deadline in ms since the epoch, -1 for none:
// "v4 <sec> <usec> <holds> <lease> <since> <expires> <alive> ...", the
// deadlines in ms after the token's time (sec, usec).
int64_t WriteAlive(const std::vector<std::string>& v) {
  if (v.size() < 8) return -2;
  const int64_t alive = std::stoll(v[7]);
  if (alive == -1) return -1;
  return std::stoll(v[1]) * 1000 + std::stoll(v[2]) / 1000 + alive;
}

// A writer's own read must not outlive the write's liveness deadline on the
// server: once the write's key lapses, another writer's SET comes in while
// the read is still believed (C23). The read's renewal raised only the
// read's deadline; a read without liveness (another client of the same
// owner token, liveness off) left the write's deadline in place.
TEST(RedisBackend, AWritersOwnReadKeepsTheWriteAliveAsLongAsItself) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  auto writing = ConnectOrDie(server->Uri("alive"));  // liveness: 10 s
  ASSERT_NE(writing, nullptr);
  AcquireOptions job;
  job.owner_token = "job-9";
  job.lease = absl::Seconds(60);
  ASSERT_OK_AND_ASSIGN(auto lock, writing->GetLock("doc"));
  ASSERT_OK_AND_ASSIGN(auto rw, writing->GetReadWriteLock("doc"));
  ASSERT_OK_AND_ASSIGN(Hold write, lock->Acquire(job));
  ASSERT_OK_AND_ASSIGN(Hold read, rw->AcquireRead(job));
  // The read renewed with a liveness TTL far beyond the write's heartbeat,
  // as the watchdog sends it (lease 60 s, TTL 600 s).
  EXPECT_EQ(*server->RawCommand({"FCALL", "dlock_v5_read_renew", "2",
                                 "dlock:{alive:doc}", "dlock:r{alive:doc}",
                                 "t:job-9", "60000", "600000"}),
            ":1\r\n");
  // A reader's entry: <token> <holds> <permits> <lease> <since> <expires>
  // <alive> <slots>, in ms since the epoch.
  const std::vector<std::string> reader =
      FieldsOf(server->RawCommand({"HGET", "dlock:r{alive:doc}", "t:job-9"}));
  ASSERT_EQ(reader.size(), 8u);
  const int64_t read_alive = std::stoll(reader[6]);
  EXPECT_GT(read_alive, absl::ToUnixMillis(absl::Now()) + 300000);
  EXPECT_GE(
      WriteAlive(FieldsOf(server->RawCommand({"GET", "dlock:{alive:doc}"}))),
      read_alive)
      << "the write may lapse while its owner's read is believed";

  // The same owner token reading through a client without liveness.
  auto unwatched =
      ConnectOrDie(absl::StrCat(server->Uri("alive"), "&liveness_ttl=off"));
  ASSERT_NE(unwatched, nullptr);
  ASSERT_OK_AND_ASSIGN(auto other_rw, unwatched->GetReadWriteLock("doc"));
  EXPECT_OK(read.Release());
  ASSERT_OK_AND_ASSIGN(Hold unwatched_read, other_rw->AcquireRead(job));
  EXPECT_EQ(
      WriteAlive(FieldsOf(server->RawCommand({"GET", "dlock:{alive:doc}"}))),
      -1)
      << "a read without a liveness deadline left the write one";
  EXPECT_OK(unwatched_read.Release());
  EXPECT_OK(write.Release());
}

// INFO commandstats' count of `command` since the last CONFIG RESETSTAT.
int64_t Calls(test::RedisServer& server, absl::string_view command) {
  absl::StatusOr<std::string> info =
      server.RawCommand({"INFO", "commandstats"});
  EXPECT_OK(info);
  if (!info.ok()) return -1;
  const std::string field = absl::StrCat("cmdstat_", command, ":calls=");
  const size_t at = info->find(field);
  return at == std::string::npos
             ? 0
             : std::strtoll(info->c_str() + at + field.size(), nullptr, 10);
}

// What an uncontended pair costs the server (docs/redis.md, scripts): the
// acquire's TIME and SET NX, the release's GETDEL, nothing else, whether
// the client keeps holders' liveness or not; a renewed hold (its value no
// longer the grant's) is released as surely, by reading its value.
TEST(RedisBackend, AnUncontendedPairIsThreeCommandsOnTheServer) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  for (const char* liveness : {"10s", "off"}) {
    auto client = ConnectOrDie(absl::StrCat(
        "redis://127.0.0.1:", server->port(), "?liveness_ttl=", liveness));
    ASSERT_NE(client, nullptr);
    absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
        client->GetLock("pair");
    ASSERT_OK(lock);
    ASSERT_EQ(*server->RawCommand({"CONFIG", "RESETSTAT"}), "+OK\r\n");
    constexpr int kPairs = 20;
    for (int i = 0; i < kPairs; ++i) {
      absl::StatusOr<Hold> hold =
          (*lock)->Acquire({.lease = absl::Seconds(10)});
      ASSERT_OK(hold);
      ASSERT_OK(hold->Release());
    }
    EXPECT_EQ(Calls(*server, "fcall"), 2 * kPairs) << liveness;
    EXPECT_EQ(Calls(*server, "time"), kPairs) << liveness;
    EXPECT_EQ(Calls(*server, "set"), kPairs) << liveness;
    EXPECT_EQ(Calls(*server, "getdel"), kPairs) << liveness;
    absl::StatusOr<Hold> renewed =
        (*lock)->Acquire({.lease = absl::Seconds(10)});
    ASSERT_OK(renewed);
    ASSERT_OK(renewed->Renew(absl::Seconds(20)));
    ASSERT_OK(renewed->Release());
    EXPECT_EQ(*server->RawCommand({"EXISTS", "dlock:{default:pair}"}),
              ":0\r\n");
  }
}

// `call` as EVAL of its script's body, on `server`: the reply's RESP.
absl::StatusOr<std::string> Eval(test::RedisServer& server,
                                 const redis::Master& master,
                                 const redis::ScriptCall& call) {
  return server.RawCommand(
      master.scripts().Command(*call.script, call.keys, call.args));
}

// The release's fast path, piece by piece: the acquire writes a free lock's
// value from its arguments and TIME's fields and answers with it; the
// client keeps what comes before the owner; the release sends the value
// back whole, and a lock that still holds it is released by that compare
// alone, before anything decodes it (shown on a value no script could
// decode), and only when the release keeps nothing.
TEST(RedisBackend, ReleasesAnUntouchedHoldByComparingItsValue) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  const redis::Master master(redis::ConnectionConfig{}, "", nullptr);
  const redis::Keyspace keys("compare", 0);
  const std::string key = keys.LockKey("job");
  const redis::ScriptCall acquire = redis::AcquireScript(
      master, keys, redis::Liveness{.ttl_ms = 10000}, "job", "me 1",
      absl::Seconds(10), /*will_wait=*/false);
  ASSERT_OK_AND_ASSIGN(const std::string resp, Eval(*server, master, acquire));
  ASSERT_OK_AND_ASSIGN(const std::string value,
                       server->RawCommand({"GET", key}));
  EXPECT_EQ(resp, value);  // the value written, as a bulk reply
  redisReply reply{};
  reply.type = REDIS_REPLY_STRING;
  const std::string body = resp.substr(resp.find("\r\n") + 2);
  reply.str = const_cast<char*>(body.data());
  reply.len = body.size() - 2;
  ASSERT_OK_AND_ASSIGN(const redis::AcquireReply parsed,
                       redis::ParseAcquire(&reply, "h:1"));
  EXPECT_THAT(parsed.fresh_prefix, ::testing::StartsWith("v4 "));
  EXPECT_THAT(parsed.fresh_prefix,
              ::testing::EndsWith(" 1 10000 1 10001 10001 0 "));
  const redis::ScriptCall release =
      redis::ReleaseScript(master, keys, "job", "me 1", 1, absl::ZeroDuration(),
                           parsed.fresh_prefix);
  EXPECT_EQ(absl::StrCat("$", release.args[0].size(), "\r\n", release.args[0],
                         "\r\n"),
            value);
  EXPECT_EQ(*Eval(*server, master, release), ":0\r\n");
  EXPECT_EQ(*server->RawCommand({"EXISTS", key}), ":0\r\n");

  // Compared before decoded: a value of another layout, sent back whole.
  const std::string foreign = "not a lock value";
  ASSERT_OK(server->RawCommand({"SET", key, foreign, "PX", "10000"}).status());
  redis::ScriptCall as_sent =
      redis::ReleaseScript(master, keys, "job", "me 1", 1);
  as_sent.args[0] = foreign;
  EXPECT_EQ(*Eval(*server, master, as_sent), ":0\r\n");
  // Not sent back, or with a keep: decoded, and refused as another layout's.
  for (const absl::Duration keep : {absl::ZeroDuration(), absl::Seconds(1)}) {
    ASSERT_OK(
        server->RawCommand({"SET", key, foreign, "PX", "10000"}).status());
    redis::ScriptCall slow =
        redis::ReleaseScript(master, keys, "job", "me 1", 1, keep);
    slow.args[0] = keep > absl::ZeroDuration() ? foreign : "";
    EXPECT_THAT(*Eval(*server, master, slow), HasSubstr("another layout"));
  }
}

// A refused caller that will wait marks the lock's value (its waited field,
// before the owner): once, or "2" from a second refusal on. The release
// announces itself then, and says when one caller only was refused, so that
// its waiter attempts at once instead of pausing for a race it cannot lose.
TEST(RedisBackend, AReleaseSaysWhenItHadOneWaiterOnly) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  const redis::Master master(redis::ConnectionConfig{}, "", nullptr);
  const redis::Keyspace keys("lone", 0);
  const std::string key = keys.LockKey("job");
  absl::Mutex mu;
  std::vector<std::string> messages;  // guarded by mu
  redis::Subscriber subscriber(
      redis::ConnectionConfig{.host = "127.0.0.1", .port = server->port()},
      keys.channel(),
      {.on_message =
           [&](absl::string_view message) {
             absl::MutexLock lock(&mu);
             messages.emplace_back(message);
           },
       .on_gap = [] {}});
  ASSERT_OK(subscriber.Start());
  for (int refused = 0; refused <= 3; ++refused) {
    auto attempt = [&](const std::string& owner, bool will_wait) {
      return Eval(*server, master,
                  redis::AcquireScript(master, keys, redis::Liveness{}, "job",
                                       owner, absl::Seconds(10), will_wait));
    };
    ASSERT_OK(attempt("me 1", false).status());
    for (int i = 0; i < refused; ++i) {
      ASSERT_OK_AND_ASSIGN(const std::string reply,
                           attempt(absl::StrCat("w ", i), true));
      EXPECT_THAT(reply, ::testing::StartsWith("*3\r\n:0\r\n")) << reply;
    }
    ASSERT_OK(attempt("w x", false).status());  // will not wait: no mark
    ASSERT_OK_AND_ASSIGN(const std::string value,
                         server->RawCommand({"GET", key}));
    EXPECT_THAT(value, ::testing::EndsWith(absl::StrCat(
                           " ", std::min(refused, 2), " me 1\r\n")));
    EXPECT_EQ(*Eval(*server, master,
                    redis::ReleaseScript(master, keys, "job", "me 1", 1)),
              ":0\r\n");
    if (refused == 0) continue;  // nobody to tell: no announcement
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(
        absl::Condition(
            +[](std::vector<std::string>* m) { return !m->empty(); },
            &messages),
        absl::Seconds(10)));
    EXPECT_EQ(messages.front(),
              refused == 1
                  ? absl::StrCat("job", std::string(1, redis::kOneWaiterMark))
                  : "job")
        << refused;
    messages.clear();
  }
  subscriber.Stop();
  absl::MutexLock lock(&mu);
  EXPECT_THAT(messages, ::testing::IsEmpty());
}

TEST(RedisBackend, OneSubscriptionPerClientWhateverTheWaiters) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  auto holder = ConnectOrDie(server->Uri("subs"));
  auto waiters = ConnectOrDie(server->Uri("subs"));
  ASSERT_TRUE(holder && waiters);
  auto held = holder->GetLock("busy");
  ASSERT_OK(held);
  absl::StatusOr<Hold> hold = (*held)->Acquire();
  ASSERT_OK(hold);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto lock = waiters->GetLock("busy");
      ASSERT_OK(lock);
      EXPECT_EQ(
          (*lock)->Acquire({.wait = absl::Milliseconds(800)}).status().code(),
          absl::StatusCode::kDeadlineExceeded);
    });
  }
  absl::SleepFor(absl::Milliseconds(300));
  // Two clients, two subscriptions, eight waiters.
  EXPECT_EQ(*server->RawCommand({"PUBSUB", "NUMSUB", "dlock:0:subs:released"}),
            "*2\r\n$21\r\ndlock:0:subs:released\r\n:2\r\n");
  for (std::thread& t : threads) t.join();
}

TEST(RedisBackend, UnreachableServerIsUnavailableAndQuick) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  server.reset();  // nothing listens there now
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect(absl::StrCat("redis://127.0.0.1:", port, "?connect_timeout=1s"));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(client.status().message(),
              HasSubstr(absl::StrCat("127.0.0.1:", port)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(RedisBackend, UriErrorsSayWhatToFix) {
  struct Case {
    std::string uri;
    std::string says;
  } cases[] = {
      {"redis://127.0.0.1:6379?pool=3", "unknown option 'pool'"},
      {"redis://127.0.0.1:6379/abc", "db"},
      {"redis://a:1,b:2", "one host"},
      {"redis://user@127.0.0.1", "needs a password"},
      {"redis://127.0.0.1?command_timeout=soon", "500ms"},
      {"redis://127.0.0.1:99999", "port"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(c.uri);
    ASSERT_FALSE(client.ok()) << c.uri;
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument)
        << c.uri << ": " << client.status();
    EXPECT_THAT(client.status().message(), HasSubstr(c.says)) << c.uri;
  }
}

}  // namespace
}  // namespace dlock
