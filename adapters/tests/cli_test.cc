// The `dlock` binary end to end, the cases one process can show on
// memory://: exit codes, the command's environment and status, usage errors,
// config profiles. Cross-process cases are in cli_backends_test.cc.
#include <signal.h>

#include <atomic>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "status_testing.h"
#include "test_util.h"

namespace dlock {
namespace {

using test::Dlock;
using test::ExpectOneLine;
using test::Process;
using test::Result;
using test::RunProcess;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(CliTest, RunPassesTheCommandsStatusAndEnvironment) {
  Result r = RunProcess(
      Dlock({"run", "--backend", "memory://", "my/job", "--", "sh", "-c",
             "echo \"$DLOCK_LOCK_NAME $DLOCK_FENCING_TOKEN\"; "
             "exit 3"}));
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.out, "my/job 1\n");
  EXPECT_EQ(
      RunProcess(Dlock({"run", "--backend", "memory://", "j", "--", "true"}))
          .code,
      0);
  // Killed by a signal: 128 + N, as a shell reports it.
  EXPECT_EQ(RunProcess(Dlock({"run", "--backend", "memory://", "j", "--", "sh",
                              "-c", "kill -KILL $$"}))
                .code,
            128 + SIGKILL);
}

TEST(CliTest, AJobRunsInItsSlotAndSkipsWithDistinctCodes) {
  // The slot and the environment; skips need a second process, and so a
  // server: cli_jobs_backends_test.
  Result r = RunProcess(
      Dlock({"run", "--backend", "memory://", "--once-per", "1d", "report",
             "--", "sh", "-c", "echo \"$DLOCK_JOB_SLOT $DLOCK_LOCK_NAME\""}));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string day =
      absl::FormatTime("%Y-%m-%dT00:00:00Z", absl::Now(), absl::UTCTimeZone());
  EXPECT_EQ(r.out, absl::StrCat(day, " report@", day, "\n"));
  // A run past --at-most-for is stopped: 76, and says why.
  Result stuck = RunProcess(
      Dlock({"run", "--backend", "memory://", "--at-most-for", "500ms",
             "--kill-after", "1s", "j", "--", "sleep", "30"}));
  EXPECT_EQ(stuck.code, 76);
  EXPECT_THAT(stuck.err, HasSubstr("--at-most-for (500ms)"));
}

TEST(CliTest, UsageErrorsExit64WithOneLine) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"frobnicate"},
      {"run", "--backend", "memory://", "name"},  // no command
      {"run", "--bogus", "--backend", "memory://", "n", "--", "true"},
      {"run", "--backend", "memory://", "--wait", "5x", "n", "--", "true"},
      {"run", "--backend", "memory://", "--lease", "0", "n", "--", "true"},
      {"run", "--backend", "memory://", "--on-lost-signal", "NOPE", "n", "--",
       "true"},
      {"run", "--backend", "memory:/", "n", "--", "true"},    // bad URI
      {"run", "--backend", "nosuch://x", "n", "--", "true"},  // unknown scheme
      {"run", "--backend", "memory://", "--profile", "p", "n", "--", "true"},
      {"run", "--profile", "p", "n", "--", "true"},         // no config file
      {"run", "--backend", "memory://", "", "--", "true"},  // bad name (C15)
      {"status", "--backend", "memory://"},
      {"unlock", "--backend", "memory://", "n"},  // no --force
      {"unlock", "--force", "--token", "0", "--backend", "memory://", "n"},
      {"top", "--backend", "memory://", "--interval", "soon"},
      {"top", "--backend", "memory://", "--sort", "size"},
      {"monitor", "--backend", "memory://", "--interval", "0"},
      {"monitor", "--backend", "memory://", "--held-longer-than", "x"},
      // A hook needs a threshold to run at.
      {"monitor", "--backend", "memory://", "--on-held-too-long", "true"},
      {"monitor", "--backend", "memory://", "--metrics-listen", "9464"},
      {"monitor", "--backend", "memory://", "--metrics-listen", "h:99999"},
      // Scheduled jobs.
      {"run", "--backend", "memory://", "--once-per", "1.5s", "j", "--",
       "true"},  // not whole seconds
      {"run", "--backend", "memory://", "--once-per", "400d", "j", "--",
       "true"},
      {"run", "--backend", "memory://", "--once-per", "1h", "--slot", "s", "j",
       "--", "true"},
      {"run", "--backend", "memory://", "--slot", "s", "j", "--",
       "true"},  // no --at-most-for
      {"run", "--backend", "memory://", "--once-per", "1h", "--at-least-for",
       "2h", "j", "--", "true"},
      {"run", "--backend", "memory://", "--once-per", "1h", "--wait", "0", "j",
       "--", "true"},
      {"run", "--backend", "memory://", "--at-most-for", "0", "j", "--",
       "true"},
  };
  for (const auto& args : cases) {
    Result r = RunProcess(Dlock(args), {"DLOCK_BACKEND=", "DLOCK_CONFIG="});
    EXPECT_EQ(r.code, 64) << absl::StrJoin(args, " ") << "\n" << r.err;
    ExpectOneLine(r);
  }
  Result none = RunProcess(Dlock({"status", "x"}), {"DLOCK_BACKEND="});
  EXPECT_EQ(none.code, 64);
  EXPECT_THAT(none.err, HasSubstr("DLOCK_BACKEND"));
}

TEST(CliTest, HelpHasExamples) {
  Result r = RunProcess(Dlock({"--help"}));
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("Examples:"));
  EXPECT_THAT(r.out, HasSubstr("dlock run"));
  Result sub = RunProcess(Dlock({"run", "--help"}));
  EXPECT_EQ(sub.code, 0);
  EXPECT_THAT(sub.out, HasSubstr("--on-lost-signal"));
  EXPECT_THAT(sub.out, HasSubstr("Example:"));
}

TEST(CliTest, CommandNotFoundOrNotExecutable) {
  Result missing = RunProcess(Dlock(
      {"run", "--backend", "memory://", "n", "--", "no-such-command-xyz"}));
  EXPECT_EQ(missing.code, 127);
  ExpectOneLine(missing);
  EXPECT_EQ(RunProcess(Dlock({"run", "--backend", "memory://", "n", "--",
                              "/etc/hostname"}))
                .code,
            126);
}

TEST(CliTest, ConfigProfileSelectsTheBackend) {
  absl::StatusOr<std::string> dir = test::MakeTempDir("dlock-cli-config");
  ASSERT_OK(dir);
  test::WriteFile(*dir + "/dlock.toml",
                  "[profiles.dev]\nbackend = \"memory://dev\"\n"
                  "namespace = \"team\"\n");
  Result r = RunProcess(Dlock({"run", "--config", *dir + "/dlock.toml",
                               "--profile", "dev", "n", "--", "echo", "ok"}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "ok\n");
  test::WriteFile(*dir + "/bad.toml",
                  "[profiles.dev]\nbackend = \"memory://dev\"\n"
                  "default_lease = \"forever\"\n");
  Result bad = RunProcess(Dlock(
      {"status", "--config", *dir + "/bad.toml", "--profile", "dev", "n"}));
  EXPECT_EQ(bad.code, 64);
  ExpectOneLine(bad);
  EXPECT_THAT(bad.err, HasSubstr("bad.toml:3: profiles.dev.default_lease"));
  test::RemoveTree(*dir);
}

TEST(CliTest, UnreachableBackendExits69WithoutThePassword) {
  absl::StatusOr<int> port = test::FreeLoopbackPort();
  ASSERT_OK(port);
  const std::string uri =
      absl::StrCat("redis://app:topsecret@127.0.0.1:", *port);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"status", "--backend", uri, "x"},
           {"list", "--backend", uri},
           {"unlock", "--force", "--backend", uri, "x"},
           {"run", "--backend", uri, "x", "--", "true"}}) {
    Result r = RunProcess(Dlock(args));
    EXPECT_EQ(r.code, 69) << r.err;
    ExpectOneLine(r);
    EXPECT_THAT(r.err, Not(HasSubstr("topsecret")));
  }
}

// With a finite --wait, a backend not reachable yet (a failover under way)
// is tried again until the wait ends; then exit 69 with the last error.
TEST(CliTest, RunWithAWaitTriesAnUnreachableBackendUntilTheWaitEnds) {
  absl::StatusOr<int> port = test::FreeLoopbackPort();
  ASSERT_OK(port);
  const std::string uri =
      absl::StrCat("redis://app:topsecret@127.0.0.1:", *port);
  const absl::Time start = absl::Now();
  Result r = RunProcess(
      Dlock({"run", "--wait", "1s", "--backend", uri, "x", "--", "true"}));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(r.code, 69) << r.err;
  ExpectOneLine(r);
  EXPECT_THAT(r.err, HasSubstr("Connection refused"));
  EXPECT_THAT(r.err, Not(HasSubstr("topsecret")));
  EXPECT_GE(took, absl::Seconds(1)) << "gave up before the wait ended";
}

}  // namespace
}  // namespace dlock
