// Copyright dlock authors. Secrets and refusals through the `dlock` binary,
// against real servers: a profile file with a password is refused on every
// backend; ZooKeeper's digest password comes from password_env or
// password_file; `dlock run` withholds the backend's secrets from the
// command; and a server that refuses the credentials or a right gives exit
// 77, never 69, on Redis (requirepass, an ACL user), PostgreSQL (scram, a
// missing role or database, no CONNECT) and ZooKeeper (a node's ACL).
// One ctest entry, so that each server starts once.
//
// The synchronous C API of ZooKeeper, which zookeeper_mt provides, is
// declared only for THREADED builds.
#ifndef THREADED
#define THREADED
#endif
#include <signal.h>
#include <zookeeper/zookeeper.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "postgres_server.h"
#include "redis_server.h"
#include "server_process.h"
#include "status_testing.h"
#include "test_util.h"
#include "zookeeper_server.h"

namespace dlock {
namespace {

using test::Dlock;
using test::Result;
using test::RunProcess;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kPassword[] = "right-pw-7c1";
constexpr char kWrong[] = "wrong-pw-9d2";

// Each server once for the binary; one that cannot start fails the test
// with the harness's message (what to install) and ends the binary.
template <typename Server>
Server& Started(absl::StatusOr<std::unique_ptr<Server>>& server,
                const char* what) {
  if (!server.ok()) {
    ADD_FAILURE() << "cannot start " << what << ": " << server.status();
    std::abort();
  }
  return **server;
}

test::RedisServer& Redis() {
  static absl::StatusOr<std::unique_ptr<test::RedisServer>> server =
      test::RedisServer::Start({.requirepass = kPassword});
  return Started(server, "redis-server");
}

test::ZooKeeperServer& ZooKeeper() {
  static absl::StatusOr<std::unique_ptr<test::ZooKeeperServer>> server =
      test::ZooKeeperServer::Start();
  return Started(server, "ZooKeeper");
}

// Runs `sql` as the superuser; fails the test if it fails.
void Psql(test::PostgresServer& server, const std::string& sql) {
  absl::StatusOr<std::string> out = server.Psql(sql);
  ASSERT_OK(out) << sql;
}

// Makes the server ask role dlock_app for its password over TCP (the
// harness trusts every local connection), and waits until the server runs
// with the new rules: a session started after the reload reports a later
// load time.
void RequirePasswordOfDlockApp(test::PostgresServer& server) {
  absl::StatusOr<std::string> hba_file = server.Psql("SHOW hba_file");
  ASSERT_OK(hba_file);
  const std::string path(absl::StripAsciiWhitespace(*hba_file));
  const std::string rules = test::ReadFileOrEmpty(path);
  ASSERT_FALSE(rules.empty()) << path;
  test::WriteFile(path,
                  absl::StrCat("host all dlock_app 127.0.0.1/32 scram-sha-256\n"
                               "host all dlock_app ::1/128 scram-sha-256\n",
                               rules));
  absl::StatusOr<std::string> before =
      server.Psql("SELECT pg_conf_load_time()");
  ASSERT_OK(before);
  Psql(server, "SELECT pg_reload_conf()");
  absl::Status reloaded = test::WaitUntil(
      [&] {
        absl::StatusOr<std::string> now = server.Psql(absl::StrCat(
            "SELECT pg_conf_load_time() > '",
            absl::StripAsciiWhitespace(*before), "'::timestamptz"));
        return now.ok() && absl::StartsWith(*now, "t");
      },
      absl::Seconds(10), "the server to reload pg_hba.conf");
  ASSERT_OK(reloaded);
}

// A PostgreSQL server with role dlock_app (password kPassword, asked over
// TCP), its own database app_db, and closed_db, which it may not connect
// to.
test::PostgresServer& Postgres() {
  static test::PostgresServer* server = [] {
    static absl::StatusOr<std::unique_ptr<test::PostgresServer>> started =
        test::PostgresServer::Start();
    test::PostgresServer& s = Started(started, "PostgreSQL");
    Psql(s, absl::StrCat("CREATE ROLE dlock_app LOGIN PASSWORD '", kPassword,
                         "'"));
    Psql(s, "CREATE DATABASE app_db OWNER dlock_app");
    Psql(s, "CREATE DATABASE closed_db");
    Psql(s, "REVOKE CONNECT ON DATABASE closed_db FROM PUBLIC");
    RequirePasswordOfDlockApp(s);
    return &s;
  }();
  return *server;
}

void IgnoreEvents(zhandle_t*, int, int, const char*, void*) {}

std::string PostgresUri(const std::string& user, const std::string& db) {
  return absl::StrCat("postgres://", user, "@127.0.0.1:", Postgres().port(),
                      "/", db);
}

class CliSecretsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = test::MakeTempDir("dlock-secrets");
    ASSERT_OK(dir);
    dir_ = *dir;
  }
  void TearDown() override { test::RemoveTree(dir_); }

  // A config file holding `toml`; returns its path.
  std::string Config(const std::string& toml) {
    const std::string path = absl::StrCat(dir_, "/dlock-", ++files_, ".toml");
    test::WriteFile(path, toml);
    return path;
  }

  // `dlock ARGS`, with the environment cleared of what would pick another
  // backend or password, plus `env`.
  Result Run(std::vector<std::string> args, std::vector<std::string> env = {}) {
    // The first of two entries wins: clear only what `env` does not set.
    for (const char* name : {"DLOCK_BACKEND=", "DLOCK_PROFILE=",
                             "DLOCK_CONFIG=", "PGPASSWORD=", "PGPASSFILE="}) {
      if (!absl::c_any_of(env, [&](const std::string& entry) {
            return absl::StartsWith(entry, name);
          })) {
        env.push_back(name);
      }
    }
    Result r = RunProcess(Dlock(std::move(args)), env);
    // What a user sees, for the record of the test run.
    if (!r.err.empty()) std::printf("    stderr: %s", r.err.c_str());
    return r;
  }

  // A refusal: exit 77, one line on stderr saying `what`, no password.
  void ExpectRefused(const Result& r, absl::string_view what) {
    EXPECT_EQ(r.code, 77) << r.err;
    test::ExpectOneLine(r);
    EXPECT_THAT(r.err, HasSubstr(what));
    EXPECT_THAT(r.err, Not(HasSubstr(kPassword)));
    EXPECT_THAT(r.err, Not(HasSubstr(kWrong)));
  }

  std::string dir_;
  int files_ = 0;
};

// docs/cli.md: "A backend URI with a password in the file is refused", in
// every spelling, on every backend; the message names the file, the line
// and the key, and where the password goes.
TEST_F(CliSecretsTest, AProfileWithAPasswordIsRefusedOnEveryBackend) {
  const std::string redis = absl::StrCat("127.0.0.1:", Redis().port());
  const std::string zk = ZooKeeper().Hosts();
  const std::string pg = absl::StrCat("127.0.0.1:", Postgres().port());
  const std::vector<std::string> backends = {
      absl::StrCat("redis://:", kPassword, "@", redis),
      absl::StrCat("redis://default:", kPassword, "@", redis, "/0"),
      absl::StrCat("redlock://:", kPassword, "@", redis, ",127.0.0.2:1,",
                   "127.0.0.3:1"),
      absl::StrCat("redis-sentinel://:", kPassword, "@", redis, "/mymaster"),
      absl::StrCat("postgres://dlock_app:", kPassword, "@", pg, "/app_db"),
      absl::StrCat("postgresql://dlock_app@", pg,
                   "/app_db?password=", kPassword),
      absl::StrCat("postgres://", pg,
                   "/app_db?user=dlock_app&PassWord=", kPassword),
      absl::StrCat("postgres://dlock_app@", pg,
                   "/app_db?sslpassword=", kPassword),
      absl::StrCat("zk://", zk, "?auth=digest:alice:", kPassword),
      absl::StrCat("zk://", zk, "?auth=digest%3Aalice%3A", kPassword),
      absl::StrCat("zk://:", kPassword, "@", zk, "?auth=digest:alice"),
      absl::StrCat("host=127.0.0.1 port=", Postgres().port(),
                   " user=dlock_app password=", kPassword, " dbname=app_db"),
  };
  for (const std::string& backend : backends) {
    const std::string config = Config(
        absl::StrCat("# shared with the team\n[profiles.prod]\nbackend = \"",
                     backend, "\"\n"));
    Result r = Run({"status", "--config", config, "--profile", "prod", "x"});
    EXPECT_EQ(r.code, 64) << backend << ": " << r.err;
    test::ExpectOneLine(r);
    // libpq's key/value form is no URI, and says so first.
    const bool key_value = absl::StartsWith(backend, "host=");
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat(
                           "dlock: ", config, ":3: profiles.prod.backend: ",
                           key_value ? "malformed URI" : "holds a password")))
        << backend;
    EXPECT_THAT(r.err, HasSubstr("password_env")) << backend;
    EXPECT_THAT(r.err, HasSubstr("password_file")) << backend;
    EXPECT_THAT(r.err, Not(HasSubstr(kPassword))) << backend;
  }
}

// ZooKeeper's digest password from a profile's password_env or
// password_file, with the user in auth=digest:USER: the test makes a node
// only alice (by her digest) may use, and the CLI locks under it.
TEST_F(CliSecretsTest, ZooKeeperDigestPasswordFromTheEnvironmentOrAFile) {
  {
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zhandle_t* zh = zookeeper_init(ZooKeeper().Hosts().c_str(), &IgnoreEvents,
                                   10000, nullptr, nullptr, 0);
    ASSERT_NE(zh, nullptr);
    absl::Status connected =
        test::WaitUntil([&] { return zoo_state(zh) == ZOO_CONNECTED_STATE; },
                        absl::Seconds(10), "a ZooKeeper session");
    ASSERT_OK(connected);
    const std::string digest = absl::StrCat("alice:", kPassword);
    // Queued before the create, so the create is alice's.
    ASSERT_EQ(zoo_add_auth(zh, "digest", digest.data(),
                           static_cast<int>(digest.size()), nullptr, nullptr),
              ZOK);
    ASSERT_EQ(zoo_create(zh, "/alice-only", "", 0, &ZOO_CREATOR_ALL_ACL,
                         ZOO_PERSISTENT, nullptr, 0),
              ZOK);
    zookeeper_close(zh);
  }
  const std::string hosts = ZooKeeper().Hosts();
  test::WriteFile(dir_ + "/zk-password", absl::StrCat(kPassword, "\n"));
  const std::string config = Config(absl::StrCat(
      "[profiles.env]\nbackend = \"zk://", hosts,
      "/alice-only?auth=digest:alice\"\npassword_env = \"ZK_PASSWORD\"\n",
      "[profiles.file]\nbackend = \"zk://", hosts,
      "/alice-only?auth=digest:alice\"\npassword_file = \"", dir_,
      "/zk-password\"\n"));
  for (const char* profile : {"env", "file"}) {
    Result r = Run({"run", "--config", config, "--profile", profile, "nightly",
                    "--", "sh", "-c", "echo ran"},
                   {absl::StrCat("ZK_PASSWORD=", kPassword)});
    EXPECT_EQ(r.code, 0) << profile << ": " << r.err;
    EXPECT_EQ(r.out, "ran\n") << profile;
  }
  // The node's ACL refuses every other digest, and no digest at all.
  const std::string refused = "lacks the right";
  ExpectRefused(Run({"run", "--config", config, "--profile", "env", "nightly",
                     "--", "true"},
                    {absl::StrCat("ZK_PASSWORD=", kWrong)}),
                refused);
  ExpectRefused(Run({"run", "--backend",
                     absl::StrCat("zk://", hosts,
                                  "/alice-only?auth=digest:bob:", kPassword),
                     "nightly", "--", "true"}),
                refused);
  ExpectRefused(
      Run({"run", "--backend", absl::StrCat("zk://", hosts, "/alice-only"),
           "nightly", "--", "true"}),
      refused);
}

// `dlock run` hands the command no secret of the backend's (DLOCK_BACKEND,
// the profile's password_env) unless --pass-env names it; everything else
// of the environment passes. The same for a scheduled job's command and
// for a monitor's hook.
TEST_F(CliSecretsTest, RunWithholdsTheBackendSecretsUnlessAsked) {
  const std::string with_password =
      absl::StrCat("redis://:", kPassword, "@127.0.0.1:", Redis().port());
  const std::vector<std::string> env = {
      absl::StrCat("DLOCK_BACKEND=", with_password), "KEEP_ME=kept"};
  Result plain = Run({"run", "env-test", "--", "env"}, env);
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_THAT(plain.out, HasSubstr("KEEP_ME=kept\n"));
  EXPECT_THAT(plain.out, HasSubstr("DLOCK_LOCK_NAME=env-test\n"));
  EXPECT_THAT(plain.out, Not(HasSubstr("DLOCK_BACKEND=")));
  EXPECT_THAT(plain.out, Not(HasSubstr(kPassword)));

  Result passed =
      Run({"run", "--pass-env", "DLOCK_BACKEND", "env-test", "--", "env"}, env);
  ASSERT_EQ(passed.code, 0) << passed.err;
  EXPECT_THAT(passed.out,
              HasSubstr(absl::StrCat("DLOCK_BACKEND=", with_password, "\n")));

  // A profile's password variable.
  const std::string config = Config(absl::StrCat(
      "[profiles.p]\nbackend = \"redis://127.0.0.1:", Redis().port(),
      "\"\npassword_env = \"APP_REDIS_PASSWORD\"\n"));
  const std::vector<std::string> profile_env = {
      absl::StrCat("APP_REDIS_PASSWORD=", kPassword), "KEEP_ME=kept"};
  Result profile = Run(
      {"run", "--config", config, "--profile", "p", "env-test", "--", "env"},
      profile_env);
  ASSERT_EQ(profile.code, 0) << profile.err;
  EXPECT_THAT(profile.out, HasSubstr("KEEP_ME=kept\n"));
  EXPECT_THAT(profile.out, Not(HasSubstr("APP_REDIS_PASSWORD=")));
  EXPECT_THAT(profile.out, Not(HasSubstr(kPassword)));
  // Asked for, once per variable; the lock name after it is still the
  // name.
  Result asked = Run(
      {"run", "--config", config, "--profile", "p", "--pass-env",
       "APP_REDIS_PASSWORD", "--pass-env", "KEEP_ME", "env-test", "--", "env"},
      profile_env);
  ASSERT_EQ(asked.code, 0) << asked.err;
  EXPECT_THAT(asked.out,
              HasSubstr(absl::StrCat("APP_REDIS_PASSWORD=", kPassword, "\n")));
  EXPECT_THAT(asked.out, HasSubstr("DLOCK_LOCK_NAME=env-test\n"));

  // A scheduled job's command.
  Result job = Run({"run", "--config", config, "--profile", "p", "--slot", "s1",
                    "--at-most-for", "1m", "env-job", "--", "env"},
                   profile_env);
  ASSERT_EQ(job.code, 0) << job.err;
  EXPECT_THAT(job.out, HasSubstr("DLOCK_JOB_SLOT=s1\n"));
  EXPECT_THAT(job.out, Not(HasSubstr(kPassword)));

  // A monitor's hook.
  std::vector<std::string> with_config = profile_env;
  with_config.push_back(absl::StrCat("DLOCK_CONFIG=", config));
  with_config.push_back("DLOCK_PROFILE=p");
  test::Process held(Dlock({"run", "held", "--", "sleep", "20"}), with_config);
  const std::string hook_env = dir_ + "/hook.env";
  test::Process monitor(
      Dlock({"monitor", "--interval", "100ms", "--held-longer-than", "100ms",
             "--on-held-too-long",
             absl::StrCat("env > ", hook_env, ".tmp && mv ", hook_env, ".tmp ",
                          hook_env)}),
      with_config);
  absl::Status hooked =
      test::WaitUntil([&] { return !test::ReadFileOrEmpty(hook_env).empty(); },
                      absl::Seconds(20), "the monitor's hook");
  ASSERT_OK(hooked) << monitor.out() << monitor.err();
  monitor.Signal(SIGTERM);
  EXPECT_EQ(monitor.Wait(), 0) << monitor.err();
  held.Signal(SIGTERM);
  held.Wait();
  const std::string hook = test::ReadFileOrEmpty(hook_env);
  EXPECT_THAT(hook, HasSubstr("DLOCK_LOCK_NAME=held\n"));
  EXPECT_THAT(hook, HasSubstr("KEEP_ME=kept\n"));
  EXPECT_THAT(hook, Not(HasSubstr("APP_REDIS_PASSWORD=")));
  EXPECT_THAT(hook, Not(HasSubstr(kPassword)));
}

// A wrong password, none, or an ACL user that may not run a command dlock
// sends: 77, and the server's reason; a server that is not there: 69.
TEST_F(CliSecretsTest, RedisRefusalsExit77) {
  const std::string at = absl::StrCat("127.0.0.1:", Redis().port());
  ExpectRefused(Run({"status", "--backend",
                     absl::StrCat("redis://:", kWrong, "@", at), "x"}),
                "WRONGPASS");
  ExpectRefused(Run({"status", "--backend", absl::StrCat("redis://", at), "x"}),
                "NOAUTH");
  // A user without the scripting commands dlock runs its operations with:
  // FUNCTION LOAD is refused, so dlock falls back to scripts, and SCRIPT LOAD
  // is refused too (backends/redis/redis_scripts.cc). The refusal names the
  // command that was refused, not the first one tried.
  absl::StatusOr<std::string> acl = Redis().RawCommand(
      {"ACL", "SETUSER", "no-scripts", "on", absl::StrCat(">", kPassword), "~*",
       "&*", "+@all", "-@scripting"});
  ASSERT_OK(acl);
  ASSERT_EQ(*acl, "+OK\r\n");
  ExpectRefused(Run({"run", "--backend",
                     absl::StrCat("redis://no-scripts:", kPassword, "@", at),
                     "x", "--", "true"}),
                "refused SCRIPT LOAD: NOPERM this user has no permissions to "
                "run the 'script|load' command");
  // The right password works; nothing there is 69.
  EXPECT_EQ(
      Run({"run", "--backend", absl::StrCat("redis://:", kPassword, "@", at),
           "x", "--", "true"})
          .code,
      0);
  EXPECT_EQ(Run({"status", "--backend",
                 absl::StrCat("redis://:", kWrong, "@127.0.0.1:1"), "x"})
                .code,
            69);
}

// A wrong password, none, a role or database that does not exist, and a
// database the role may not connect to: 77, with the server's reason and
// SQLSTATE.
TEST_F(CliSecretsTest, PostgresRefusalsExit77) {
  const std::string pg = absl::StrCat("127.0.0.1:", Postgres().port());
  ExpectRefused(
      Run({"status", "--backend",
           absl::StrCat("postgres://dlock_app:", kWrong, "@", pg, "/app_db"),
           "x"}),
      "password authentication failed for user \"dlock_app\" (SQLSTATE "
      "28P01)");
  ExpectRefused(
      Run({"status", "--backend", PostgresUri("dlock_app", "app_db"), "x"}),
      "no password supplied; the server asks for a password");
  ExpectRefused(
      Run({"status", "--backend", PostgresUri("ghost", "postgres"), "x"}),
      "role \"ghost\" does not exist (SQLSTATE 28000)");
  ExpectRefused(
      Run({"status", "--backend", PostgresUri("postgres", "no_such_db"), "x"}),
      "database \"no_such_db\" does not exist (SQLSTATE 3D000)");
  const std::string config = Config(absl::StrCat(
      "[profiles.closed]\nbackend = \"", PostgresUri("dlock_app", "closed_db"),
      "\"\npassword_env = \"PG_APP_PASSWORD\"\n",
      "[profiles.app]\nbackend = \"", PostgresUri("dlock_app", "app_db"),
      "\"\npassword_env = \"PG_APP_PASSWORD\"\n"));
  const std::vector<std::string> env = {
      absl::StrCat("PG_APP_PASSWORD=", kPassword)};
  Result closed =
      Run({"status", "--config", config, "--profile", "closed", "x"}, env);
  ExpectRefused(closed, "permission denied for database \"closed_db\"");
  EXPECT_THAT(closed.err, HasSubstr("(SQLSTATE 42501)"));
  // The right password, from the profile, where the role may connect.
  Result ok = Run(
      {"run", "--config", config, "--profile", "app", "x", "--", "true"}, env);
  EXPECT_EQ(ok.code, 0) << ok.err;
}

}  // namespace
}  // namespace dlock
