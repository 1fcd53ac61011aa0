// Issue 22's messages, through the `dlock` binary on memory:// (what needs
// a second process is in cli_backends_test.cc): one duration parser with
// ranges checked before any backend, the CLI's words instead of C++ names, a
// backend that is not a URI, the `--` hint, and a job without a slot.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "status_testing.h"
#include "test_util.h"

namespace dlock {
namespace {

using test::Dlock;
using test::ExpectOneLine;
using test::Result;
using test::RunProcess;
using ::testing::HasSubstr;
using ::testing::Not;

Result Dl(std::vector<std::string> args) {
  return RunProcess(Dlock(std::move(args)),
                    {"DLOCK_BACKEND=", "DLOCK_CONFIG=", "DLOCK_PROFILE="});
}

// `dlock run` with `flags`, then a lock name and `true`.
Result RunTrue(std::vector<std::string> flags,
               const std::string& backend = "memory://") {
  flags.insert(flags.begin(), {"run", "--backend", backend});
  flags.insert(flags.end(), {"n", "--", "true"});
  return Dl(std::move(flags));
}

// A usage error: exit 64, one line, saying `message` in the CLI's words.
void ExpectUsageError(const Result& r, const std::string& message,
                      const std::vector<std::string>& args) {
  EXPECT_EQ(r.code, 64) << absl::StrJoin(args, " ") << ": " << r.err;
  ExpectOneLine(r);
  EXPECT_THAT(r.err, HasSubstr(message));
  EXPECT_THAT(r.err, Not(HasSubstr("ClientOptions")));
  EXPECT_THAT(r.err, Not(HasSubstr("::")));
}

TEST(CliMessagesTest, EveryDurationFlagTakesDays) {
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{{"--lease", "1d"},
                                             {"--wait", "1d"},
                                             {"--lease", "1h30m"},
                                             {"--kill-after", "1.5s"}}) {
    Result r = RunTrue(flags);
    EXPECT_EQ(r.code, 0) << absl::StrJoin(flags, " ") << ": " << r.err;
  }
  Result job = Dl({"run", "--backend", "memory://", "--slot", "s",
                   "--at-most-for", "1d", "j", "--", "true"});
  EXPECT_EQ(job.code, 0) << job.err;
}

TEST(CliMessagesTest, DurationsOutOfRangeAreRefusedBeforeAnyBackend) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--lease", "9999999999999h"},
       "--lease: '9999999999999h' is out of range: give a duration from 30ms "
       "to 366d"},
      {{"--lease", "5ms"},
       "--lease: '5ms' is out of range: give a duration from 30ms to 366d"},
      {{"--wait", "9999999999999h"}, "--wait: '9999999999999h' is not a wait"},
      {{"--kill-after", "99999999999h"},
       "--kill-after: '99999999999h' is out of range: give a duration from "
       "1ms to 1d"},
      {{"--slot", "s", "--at-most-for", "9999999999999h"},
       "--at-most-for: '9999999999999h' is out of range: give a duration "
       "from 10ms to 366d"},
      {{"--once-per", "400d"},
       "--once-per: '400d' is out of range: give a duration from 1s to 366d"},
      {{"--lease", "soon"},
       "--lease: 'soon' is not a positive duration; write it like 500ms, 30s, "
       "2m, 1h or 1d"},
  };
  for (const auto& [flags, message] : cases) {
    ExpectUsageError(RunTrue(flags), message, flags);
  }
  // URI options: the same parser and ranges, on every scheme.
  Result uri = RunTrue({}, "memory://?liveness_ttl=9999999999999h");
  EXPECT_EQ(uri.code, 64) << uri.err;
  EXPECT_THAT(uri.err, HasSubstr("'liveness_ttl' must be a duration from "
                                 "10ms to 1h"));
}

TEST(CliMessagesTest, MessagesSpeakOfFlagsAndUriOptionsNotCpp) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"run", "--backend", "memory://?namespace=b", "--namespace", "a", "n",
        "--", "true"},
       "--namespace 'a' and the backend URI's namespace=b differ; give one"},
      {{"run", "--backend", "memory://", "--lease", "10ms", "n", "--", "true"},
       "--lease: '10ms' is out of range"},
      {{"status", "--backend", "memory://?namespace=b", "--namespace", "a",
        "x"},
       "--namespace 'a' and the backend URI's namespace=b differ"},
  };
  for (const auto& [args, message] : cases) {
    ExpectUsageError(Dl(args), message, args);
  }
}

TEST(CliMessagesTest, ABackendThatIsNotAUriSaysWhatIsMissing) {
  Result bare = RunTrue({}, "127.0.0.1:6379");
  EXPECT_EQ(bare.code, 64);
  ExpectOneLine(bare);
  EXPECT_THAT(bare.err,
              HasSubstr("dlock: the backend URI: '127.0.0.1:6379' is not a "
                        "URI: it has no scheme; write e.g. "
                        "redis://127.0.0.1:6379; this build takes "));
  Result half = RunTrue({}, "redis:/oops");
  EXPECT_EQ(half.code, 64);
  EXPECT_THAT(half.err,
              HasSubstr("'redis:/oops' is not a URI: after 'redis:' write // "
                        "and the host, e.g. redis://127.0.0.1:6379"));
  // What may hold a password is not quoted.
  Result secret = RunTrue({}, "app:s3cret@db:5432");
  EXPECT_EQ(secret.code, 64);
  EXPECT_THAT(secret.err, Not(HasSubstr("s3cret")));
  EXPECT_THAT(secret.err, HasSubstr("is not a URI: it has no scheme"));
}

TEST(CliMessagesTest, FlagsOfTheCommandWithoutDashDashGetTheHint) {
  Result r =
      Dl({"run", "--backend", "memory://", "--wait", "5s", "x", "ls", "-la"});
  EXPECT_EQ(r.code, 64);
  ExpectOneLine(r);
  EXPECT_EQ(r.err,
            "dlock: '-la' is not an option of dlock run; if the command takes "
            "it, put -- before the command: dlock run --backend memory:// "
            "--wait 5s x -- ls -la\n");
}

TEST(CliMessagesTest, AtLeastForWithoutASlotSaysASlotIsNeeded) {
  Result r = RunTrue({"--at-least-for", "5m"});
  EXPECT_EQ(r.code, 64);
  ExpectOneLine(r);
  EXPECT_THAT(r.err, HasSubstr("--at-least-for makes a scheduled job, which "
                               "needs a slot: add --once-per PERIOD"));
  EXPECT_THAT(r.err, Not(HasSubstr("needs --at-most-for")));
}

TEST(CliMessagesTest, ConfigDurationsUseTheSameParserAndRanges) {
  absl::StatusOr<std::string> dir = test::MakeTempDir("dlock-cli-msg");
  ASSERT_OK(dir);
  const std::string path = *dir + "/dlock.toml";
  test::WriteFile(path,
                  "[profiles.dev]\nbackend = \"memory://dev\"\n"
                  "default_lease = \"1d\"\n");
  Result ok =
      Dl({"run", "--config", path, "--profile", "dev", "n", "--", "true"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  test::WriteFile(path,
                  "[profiles.dev]\nbackend = \"memory://dev\"\n"
                  "default_lease = \"5ms\"\n");
  Result bad = Dl({"status", "--config", path, "--profile", "dev", "n"});
  EXPECT_EQ(bad.code, 64);
  ExpectOneLine(bad);
  EXPECT_THAT(bad.err, HasSubstr("profiles.dev.default_lease: '5ms' is out of "
                                 "range: give a duration from 30ms to 366d"));
  EXPECT_THAT(bad.err, Not(HasSubstr("ClientOptions")));
  test::RemoveTree(*dir);
}

}  // namespace
}  // namespace dlock
