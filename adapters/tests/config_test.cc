// Config-selected backends: profiles from TOML, errors naming file, line and
// key, the environment, and credentials that are never printed.
#include "dlock/adapters/config.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redis_server.h"
#include "server_process.h"
#include "status_testing.h"
#include "test_util.h"

namespace dlock {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kGood[] = R"(# dlock.toml
default_profile = "local"

[profiles.local]
backend = "memory://config-test"

[profiles.prod]
backend = "redis://redis.internal:6379/0"
namespace = "billing"
default_lease = "20s"
default_wait = "0"
connect_timeout = "2s"
command_timeout = "500ms"
close_timeout = "3s"
fallback_poll = "250ms"
username = "app"
password_env = "PROD_REDIS_PASSWORD"
)";

// Sets an environment variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(ConfigTest, ParsesProfiles) {
  absl::StatusOr<Config> config = ParseConfig(kGood, "dlock.toml");
  ASSERT_OK(config);
  EXPECT_EQ(config->default_profile, "local");
  absl::StatusOr<Profile> prod = config->Find("prod");
  ASSERT_OK(prod);
  EXPECT_EQ(prod->backend, "redis://redis.internal:6379/0");
  EXPECT_EQ(prod->lock_namespace, "billing");
  EXPECT_EQ(prod->default_lease, absl::Seconds(20));
  EXPECT_EQ(prod->default_wait, absl::ZeroDuration());
  EXPECT_EQ(prod->connect_timeout, absl::Seconds(2));
  // command_timeout is operation_timeout's older name.
  EXPECT_EQ(prod->operation_timeout, absl::Milliseconds(500));
  EXPECT_EQ(prod->close_timeout, absl::Seconds(3));
  EXPECT_EQ(prod->fallback_poll, absl::Milliseconds(250));
  EXPECT_EQ(prod->username, "app");
  EXPECT_EQ(prod->password_env, "PROD_REDIS_PASSWORD");
  EXPECT_EQ(prod->origin, "dlock.toml:7");
  absl::StatusOr<Profile> local = config->Find("local");
  ASSERT_OK(local);
  EXPECT_EQ(local->default_lease, absl::Seconds(30));
  EXPECT_EQ(local->default_wait, absl::InfiniteDuration());
  EXPECT_THAT(
      config->Find("staging").status().message(),
      HasSubstr("dlock.toml: no profile 'staging'; it has local, prod"));
}

struct BadCase {
  const char* text;
  const char* message;  // what the error must say, file:line first
};

TEST(ConfigTest, ErrorsNameTheFileTheLineAndTheKey) {
  const BadCase cases[] = {
      {"[profiles.a]\nbackend = \"memory://\"\nleese = \"1s\"\n",
       "cfg.toml:3: profiles.a.leese: unknown key"},
      {"[profiles.a]\nbackend = \"memory://\"\n\ndefault_lease = \"3x\"\n",
       "cfg.toml:4: profiles.a.default_lease: '3x' is not a positive duration"},
      {"[profiles.a]\nbackend = 42\n",
       "cfg.toml:2: profiles.a.backend: must be a string"},
      {"[profiles.a]\nnamespace = \"x\"\n",
       "cfg.toml:1: profiles.a.backend: missing"},
      {"[profiles.a]\nbackend = \"memory:/\"\n",
       "cfg.toml:2: profiles.a.backend: malformed URI"},
      {"[profiles.a]\nbackend = \"memory://\"\nbackend = \"x\"\n",
       "cfg.toml:3:"},  // a toml++ syntax error, with line and column
      {"default_profile = \"b\"\n[profiles.a]\nbackend = \"memory://\"\n",
       "cfg.toml:1: default_profile: names profile 'b'"},
      {"wait = \"1s\"\n", "cfg.toml:1: wait: unknown key"},
      {"[profiles.a]\nbackend = \"memory://\"\noperation_timeout = \"1s\"\n"
       "command_timeout = \"2s\"\n",
       "profiles.a.operation_timeout: differs from the other of "
       "operation_timeout and command_timeout"},
      {"[profiles.a]\nbackend = \"memory://\"\nconnect_timeout = \"5\"\n",
       "cfg.toml:3: profiles.a.connect_timeout: '5' is not a positive "
       "duration"},
      {"[profiles.a]\nbackend = \"memory://\"\npassword_env = \"A\"\n"
       "password_file = \"/f\"\n",
       "cfg.toml:1: profiles.a.password_env: give password_env or "
       "password_file, not both"},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<Config> config = ParseConfig(c.text, "cfg.toml");
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument)
        << c.text;
    EXPECT_THAT(config.status().message(), HasSubstr(c.message)) << c.text;
  }
}

TEST(ConfigTest, APasswordInTheFileIsRefusedWithoutShowingIt) {
  absl::StatusOr<Config> config = ParseConfig(
      "[profiles.a]\nbackend = \"redis://app:hunter2@h:6379\"\n", "c.toml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("c.toml:2: profiles.a.backend"));
  EXPECT_THAT(config.status().message(), Not(HasSubstr("hunter2")));
}

// The rule of docs/cli.md on every backend and in every spelling a URI can
// carry a password: the file is refused, the message names the file, the
// line and the key, says where the password goes, and never shows it.
TEST(ConfigTest, EverySpellingOfAPasswordIsRefusedOnEveryBackend) {
  const char* kBackends[] = {
      "redis://:hunter2@h:6379",
      "redis://app:hunter2@h:6379/0",
      "redis://app:hunter2@h:6379?namespace=n",
      "redis-sentinel://:hunter2@s1:26379,s2:26379/mymaster",
      "redlock://app:hunter2@a:6379,b:6379,c:6379",
      "postgres://app:hunter2@db:5432/locks",
      "postgresql://app:hunter2@db1:5432,db2:5432/locks",
      "postgres://app@db/locks?password=hunter2",
      "postgres://db/locks?user=app&Password=hunter2",
      "postgres://db/locks?pass%77ord=hunter2",
      "postgres://db/locks?sslpassword=hunter2",
      "zk://zk1:2181/locks?auth=digest:app:hunter2",
      "zk://zk1:2181?auth=digest%3Aapp%3Ahunter2",
      "zk://zk1:2181?auth=app:hunter2",
      "zk://:hunter2@zk1:2181?auth=digest:app",
      "memory://x?secret=hunter2",
  };
  for (const char* backend : kBackends) {
    const std::string text = absl::StrCat(
        "default_profile = \"prod\"\n[profiles.prod]\nbackend = \"", backend,
        "\"\n");
    absl::StatusOr<Config> config = ParseConfig(text, "/etc/dlock.toml");
    ASSERT_FALSE(config.ok()) << backend;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(config.status().message());
    EXPECT_THAT(message,
                HasSubstr("/etc/dlock.toml:3: profiles.prod.backend: holds a "
                          "password"))
        << backend;
    EXPECT_THAT(message, HasSubstr("password_env")) << backend;
    EXPECT_THAT(message, HasSubstr("password_file")) << backend;
    EXPECT_THAT(message, Not(HasSubstr("hunter2"))) << backend;
  }
  // Not a URI, and a password in it all the same: libpq's key/value form,
  // or a password whose '/' ends the authority early.
  for (const char* backend : {"host=db user=app password=hunter2 dbname=locks",
                              "redis://app:hun/ter2@h:6379"}) {
    absl::StatusOr<Config> config = ParseConfig(
        absl::StrCat("[profiles.prod]\nbackend = \"", backend, "\"\n"),
        "/etc/dlock.toml");
    ASSERT_FALSE(config.ok()) << backend;
    const std::string message(config.status().message());
    EXPECT_THAT(message, HasSubstr("/etc/dlock.toml:2: profiles.prod.backend: "
                                   "malformed URI"))
        << backend;
    EXPECT_THAT(message, HasSubstr("password_env")) << backend;
    EXPECT_THAT(message, Not(HasSubstr("hunter2"))) << backend;
    EXPECT_THAT(message, Not(HasSubstr("ter2"))) << backend;
  }
  // Without the password the same profiles load, the ZooKeeper one naming
  // its digest user only.
  for (const char* backend :
       {"redis://app@h:6379/0", "postgres://app@db/locks?sslmode=require",
        "zk://zk1:2181/locks?auth=digest:app"}) {
    absl::StatusOr<Config> config =
        ParseConfig(absl::StrCat("[profiles.prod]\nbackend = \"", backend,
                                 "\"\npassword_env = \"PW\"\n"),
                    "/etc/dlock.toml");
    EXPECT_OK(config) << backend;
  }
}

TEST(ConfigTest, LoadConfigNamesAMissingFile) {
  absl::StatusOr<Config> config = LoadConfig("/nonexistent/dlock.toml");
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(), HasSubstr("/nonexistent/dlock.toml"));
}

TEST(ConfigTest, ResolutionOrder) {
  absl::StatusOr<std::string> dir = test::MakeTempDir("dlock-config");
  ASSERT_OK(dir);
  const std::string path = *dir + "/dlock.toml";
  test::WriteFile(path, kGood);
  unsetenv(kBackendEnv);
  unsetenv(kProfileEnv);
  unsetenv(kConfigEnv);

  EXPECT_EQ(ResolveBackend({}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ResolveBackend({}).status().message(),
              HasSubstr("DLOCK_BACKEND"));
  {
    // A command of `dlock run` that runs dlock itself: told why there is no
    // DLOCK_BACKEND, and how to ask for it.
    ScopedEnv under_run("DLOCK_LOCK_NAME", "job");
    EXPECT_THAT(ResolveBackend({}).status().message(),
                HasSubstr("--pass-env DLOCK_BACKEND"));
  }
  EXPECT_THAT(ResolveBackend({}).status().message(),
              Not(HasSubstr("--pass-env")));
  EXPECT_EQ(ResolveBackend({.uri = "memory://a"})->backend, "memory://a");
  EXPECT_THAT(ResolveBackend({.profile = "prod"}).status().message(),
              HasSubstr("needs a config file"));
  EXPECT_EQ(ResolveBackend({.profile = "prod", .config_path = path})->name,
            "prod");
  {
    ScopedEnv backend(kBackendEnv, "memory://from-env");
    EXPECT_EQ(ResolveBackend({})->backend, "memory://from-env");
    EXPECT_EQ(ResolveBackend({.uri = "memory://flag"})->backend,
              "memory://flag");  // a flag beats the environment
  }
  {
    ScopedEnv config(kConfigEnv, path);
    EXPECT_EQ(ResolveBackend({})->name, "local");  // default_profile
    ScopedEnv profile(kProfileEnv, "prod");
    EXPECT_EQ(ResolveBackend({})->name, "prod");
    absl::StatusOr<std::unique_ptr<LockClient>> client = ConnectFromEnv();
    // prod's password variable is unset: named, and nothing connects.
    EXPECT_THAT(client.status().message(),
                HasSubstr("PROD_REDIS_PASSWORD is not set"));
  }
  {
    ScopedEnv config(kConfigEnv, path);
    absl::StatusOr<std::unique_ptr<LockClient>> client = ConnectFromEnv();
    ASSERT_OK(client);
    EXPECT_EQ((*client)->endpoint(), "memory://config-test");
  }
  test::RemoveTree(*dir);
}

TEST(ConfigTest, ProfileSettingsReachTheClient) {
  absl::StatusOr<Config> config = ParseConfig(
      "[profiles.p]\nbackend = \"memory://ns-test\"\nnamespace = \"team-a\"\n"
      "connect_timeout = \"1s\"\noperation_timeout = \"2s\"\n",
      "p.toml");
  ASSERT_OK(config);
  // The common options: memory:// takes them too (they bound nothing there).
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      ConnectProfile(*config->Find("p"));
  ASSERT_OK(client);
  EXPECT_EQ((*client)->lock_namespace(), "team-a");

  // A backend's own error is prefixed with where the profile is.
  Profile p = *config->Find("p");
  p.backend = "memory://ns-test?session_timeout=1s";
  absl::StatusOr<std::unique_ptr<LockClient>> bad = ConnectProfile(p);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("profile 'p' (p.toml:1)"));
  EXPECT_THAT(bad.status().message(), HasSubstr("session_timeout"));
  // So is the core's, for a value it cannot take.
  p.backend = "memory://ns-test";
  p.operation_timeout = absl::Hours(2);
  bad = ConnectProfile(p);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("profile 'p' (p.toml:1)"));
  EXPECT_THAT(bad.status().message(), HasSubstr("'operation_timeout'"));
  // And a timeout given twice, in the profile and in its URI.
  p.operation_timeout.reset();
  p.backend = "memory://ns-test?connect_timeout=1s";
  bad = ConnectProfile(p);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("connect_timeout: also given in the backend URI"));
}

TEST(ConfigTest, CredentialsComeFromTheEnvironmentOrAFileAndAreNeverPrinted) {
  absl::StatusOr<std::unique_ptr<test::RedisServer>> redis =
      test::RedisServer::Start({.requirepass = "s3cr3t-pw"});
  ASSERT_OK(redis);
  absl::StatusOr<std::string> dir = test::MakeTempDir("dlock-secret");
  ASSERT_OK(dir);
  test::WriteFile(*dir + "/pw", "s3cr3t-pw\n");
  test::WriteFile(*dir + "/wrong", "not-the-pw\n");
  const std::string text = absl::StrCat(
      "[profiles.env]\nbackend = \"", (*redis)->Uri(), "\"\n",
      "password_env = \"TEST_REDIS_PW\"\nconnect_timeout = \"2s\"\n",
      "[profiles.file]\nbackend = \"", (*redis)->Uri(), "\"\n",
      "password_file = \"", *dir, "/pw\"\n", "[profiles.wrong]\nbackend = \"",
      (*redis)->Uri(), "\"\n", "password_file = \"", *dir, "/wrong\"\n",
      "[profiles.none]\nbackend = \"", (*redis)->Uri(), "\"\n");
  absl::StatusOr<Config> config = ParseConfig(text, "redis.toml");
  ASSERT_OK(config);

  ScopedEnv pw("TEST_REDIS_PW", "s3cr3t-pw");
  for (const char* name : {"env", "file"}) {
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        ConnectProfile(*config->Find(name));
    ASSERT_OK(client) << name;
    EXPECT_THAT((*client)->endpoint(), Not(HasSubstr("s3cr3t")));
    absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
        (*client)->GetLock("authenticated");
    ASSERT_OK(lock);
    absl::StatusOr<Hold> hold = (*lock)->TryAcquire();
    ASSERT_OK(hold) << name;
    EXPECT_OK(hold->Release());
  }
  for (const char* name : {"wrong", "none"}) {
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        ConnectProfile(*config->Find(name));
    absl::Status status =
        client.ok() ? (*client)->Admin().List().status() : client.status();
    EXPECT_FALSE(status.ok()) << name;
    EXPECT_THAT(status.message(), Not(HasSubstr("not-the-pw"))) << name;
    EXPECT_THAT(status.message(), Not(HasSubstr("s3cr3t"))) << name;
  }
  test::RemoveTree(*dir);
}

TEST(ConfigTest, ParseWait) {
  EXPECT_EQ(*ParseWait("0"), absl::ZeroDuration());
  EXPECT_EQ(*ParseWait("forever"), absl::InfiniteDuration());
  EXPECT_EQ(*ParseWait("500ms"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseWait("2m"), absl::Minutes(2));
  EXPECT_FALSE(ParseWait("-1s").ok());
  EXPECT_FALSE(ParseWait("soon").ok());
}

}  // namespace
}  // namespace dlock
