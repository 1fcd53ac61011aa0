// The least-privilege ACL user of docs/redis.md, made from the line on that
// page: it locks in its namespace, and can touch nothing else; the commands
// the line allows are the ones dlock sends; a command the ACL refuses is
// PermissionDenied naming it (or, inside a script, the commands the script
// calls), a wrong password Unauthenticated. (The whole conformance suite
// runs as this user over TLS: conformance_redis_tls.)
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "dlock/dlock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redis_master.h"
#include "redis_scripts.h"
#include "redis_server.h"
#include "server_process.h"
#include "status_testing.h"

namespace dlock {
namespace {

using ::dlock::test::RedisServer;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kPassword[] = "acl-user-pw";

std::unique_ptr<RedisServer> StartWith(const std::string& rules) {
  absl::StatusOr<std::unique_ptr<RedisServer>> server =
      RedisServer::Start({.acl_user = "dlock", .acl_rules = rules});
  EXPECT_OK(server);
  return server.ok() ? *std::move(server) : nullptr;
}

std::string DocumentedRules() {
  absl::StatusOr<std::string> rules =
      test::DlockAclRules("billing", "0", kPassword);
  EXPECT_OK(rules);
  return rules.value_or("");
}

std::string Uri(const RedisServer& server, const std::string& ns) {
  return absl::StrCat("redis://dlock:", kPassword, "@127.0.0.1:", server.port(),
                      "?namespace=", ns);
}

// The raw reply to `argv` sent as the ACL user.
std::string AsTheUser(const RedisServer& server,
                      const std::vector<std::string>& argv) {
  absl::StatusOr<std::string> reply = test::TcpExchange(
      server.port(),
      absl::StrCat(test::EncodeRedisCommand({"AUTH", "dlock", kPassword}),
                   test::EncodeRedisCommand(argv),
                   test::EncodeRedisCommand({"QUIT"})),
      absl::Seconds(5));
  EXPECT_OK(reply);
  // "+OK" for AUTH, the reply, "+OK" for QUIT.
  std::string out = reply.value_or("");
  if (absl::StartsWith(out, "+OK\r\n")) out = out.substr(5);
  if (absl::EndsWith(out, "+OK\r\n")) out.resize(out.size() - 5);
  return out;
}

TEST(RedisAcl, TheDocumentedUserLocksInItsNamespaceAndTouchesNothingElse) {
  auto server = StartWith(DocumentedRules());
  ASSERT_NE(server, nullptr);
  ASSERT_OK_AND_ASSIGN(auto client, Connect(Uri(*server, "billing")));
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("invoice"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->TryAcquire());
  ASSERT_OK_AND_ASSIGN(LockInfo info, client->Admin().Inspect("invoice"));
  EXPECT_TRUE(info.locked);
  ASSERT_OK_AND_ASSIGN(std::vector<LockInfo> listed, client->Admin().List());
  EXPECT_EQ(listed.size(), 1u);
  EXPECT_OK(hold.Release());

  // Another namespace: refused at Connect (the layout check on its keys
  // comes before the subscription to its release channel).
  absl::StatusOr<std::unique_ptr<LockClient>> other =
      Connect(Uri(*server, "payroll"));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kPermissionDenied)
      << other.status();
  EXPECT_THAT(std::string(other.status().message()),
              AllOf(HasSubstr("NOPERM"), HasSubstr("docs/redis.md"),
                    Not(HasSubstr(kPassword))));

  // Keys outside the namespace are neither read nor written, whatever the
  // command; the namespace's own are.
  for (const std::vector<std::string>& argv :
       std::vector<std::vector<std::string>>{
           {"GET", "session:42"},
           {"SET", "session:42", "x"},
           {"DEL", "session:42"},
           {"GET", "dlock:payroll:fence"},
           {"GET", "dlock:{payroll:invoice}"},
           {"SUBSCRIBE", "dlock:0:payroll:released"},
           {"FUNCTION", "LOAD", "REPLACE",
            absl::StrCat("#!lua name=", redis::kLibrary, "\nreturn 1")},
           {"EVAL", "return redis.call('GET', KEYS[1])", "1", "session:42"},
           {"EVAL", "return redis.call('SET', 'session:42', 'x')", "0"},
           {"KEYS", "*"},
           {"FLUSHALL"},
           {"CONFIG", "GET", "requirepass"}}) {
    EXPECT_THAT(AsTheUser(*server, argv),
                AnyOf(StartsWith("-NOPERM"), HasSubstr("can't")))
        << argv[0] << " " << (argv.size() > 1 ? argv[1] : "");
  }
  // The namespace's own keys: the rolling-upgrade mark, and the lock.
  EXPECT_THAT(AsTheUser(*server, {"GET", "dlock:billing:fence"}),
              HasSubstr("dlock-v3 layout"));
  EXPECT_THAT(AsTheUser(*server, {"SET", "dlock:{billing:other}", "x"}),
              StartsWith("+OK"));
  EXPECT_EQ(server->RawCommand({"EXISTS", "session:42"}).value_or(""),
            ":0\r\n");
}

// The `+command` words of the documented line.
std::set<std::string> DocumentedCommands() {
  std::set<std::string> commands;
  for (absl::string_view word : absl::StrSplit(DocumentedRules(), ' ')) {
    if (absl::ConsumePrefix(&word, "+")) {
      commands.insert(absl::AsciiStrToUpper(word));
    }
  }
  return commands;
}

TEST(RedisAcl, TheLineAllowsExactlyTheCommandsDlockSends) {
  // Outside the scripts: redis_connection.cc (SELECT, ROLE),
  // redis_scripts.cc (SCRIPT LOAD, after FUNCTION LOAD, which the line
  // refuses on purpose), redis_master.cc and redis_scripts.cc (EVALSHA,
  // EVAL), redis_layout.cc (EVAL, SCAN), redis_subscriber.cc (SUBSCRIBE),
  // redis_router.cc (WAIT), redis_lock_ops.cc (SCAN, INFO), and for a
  // cluster redis_shard_subscriber.cc (SSUBSCRIBE), redis_cluster_router.cc
  // (CLUSTER SLOTS) and redis_master.cc (ASKING). AUTH needs no permission.
  std::set<std::string> sent = {
      "EVALSHA", "EVAL", "SCRIPT|LOAD", "SUBSCRIBE",     "SSUBSCRIBE", "SELECT",
      "ROLE",    "WAIT", "SCAN",        "CLUSTER|SLOTS", "ASKING",     "INFO"};
  const redis::Scripts scripts;
  for (const redis::Script* script :
       {&scripts.acquire, &scripts.release, &scripts.renew,
        &scripts.refresh_liveness, &scripts.inspect, &scripts.force_unlock,
        &scripts.force_unlock_if_token, &scripts.raise_token,
        &scripts.layout_guard, &scripts.sem_acquire, &scripts.sem_release,
        &scripts.sem_renew, &scripts.holder_refresh_liveness,
        &scripts.holders_inspect, &scripts.holders_abandon,
        &scripts.holders_force_unlock, &scripts.election_proclaim,
        &scripts.holder_raise_token, &scripts.multi_acquire}) {
    const std::set<std::string> called = redis::CommandsCalledBy(script->body);
    EXPECT_FALSE(called.empty()) << script->name;
    sent.insert(called.begin(), called.end());
  }
  EXPECT_EQ(DocumentedCommands(), sent)
      << "docs/redis.md's ACL line and the commands dlock sends differ";
}

TEST(RedisAcl, ACommandTheAclRefusesIsPermissionDeniedNamingIt) {
  const std::string documented = DocumentedRules();
  // Outside a script: Redis names the command.
  auto no_evalsha =
      StartWith(absl::StrReplaceAll(documented, {{" +evalsha", ""}}));
  ASSERT_NE(no_evalsha, nullptr);
  ASSERT_OK_AND_ASSIGN(auto client, Connect(Uri(*no_evalsha, "billing")));
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("invoice"));
  absl::StatusOr<Hold> refused = lock->TryAcquire();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied)
      << refused.status();
  EXPECT_THAT(refused.status().message(),
              AllOf(HasSubstr("NOPERM"), HasSubstr("'evalsha'"),
                    HasSubstr("ACL"), HasSubstr("docs/redis.md")));
  std::cout << "REFUSED without +evalsha: " << refused.status().message()
            << std::endl;

  // Inside a script: Redis names no command; the message lists the
  // script's. (GETDEL: release calls it, the connect-time layout check and
  // acquire do not.)
  auto no_getdel =
      StartWith(absl::StrReplaceAll(documented, {{" +getdel", ""}}));
  ASSERT_NE(no_getdel, nullptr);
  ASSERT_OK_AND_ASSIGN(auto inner, Connect(Uri(*no_getdel, "billing")));
  ASSERT_OK_AND_ASSIGN(auto inner_lock, inner->GetLock("invoice"));
  ASSERT_OK_AND_ASSIGN(Hold held, inner_lock->TryAcquire());
  const absl::Status inner_refused = held.Release();
  EXPECT_EQ(inner_refused.code(), absl::StatusCode::kPermissionDenied)
      << inner_refused;
  EXPECT_THAT(
      inner_refused.message(),
      AllOf(HasSubstr("release"), HasSubstr("GETDEL"), HasSubstr("ACL")));
  std::cout << "REFUSED without +getdel: " << inner_refused.message()
            << std::endl;

  // A wrong password is another matter: Unauthenticated.
  absl::StatusOr<std::unique_ptr<LockClient>> wrong = Connect(
      absl::StrCat("redis://dlock:not-it@127.0.0.1:", no_getdel->port()));
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated)
      << wrong.status();
  EXPECT_THAT(wrong.status().message(),
              AllOf(HasSubstr("WRONGPASS"), Not(HasSubstr("not-it"))));
}

}  // namespace
}  // namespace dlock
