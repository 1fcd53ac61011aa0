// `dlock run --permits/--shared/--all`, `dlock elect` and `dlock leader`
// on memory://, the cases one process shows: what the command sees, usage
// errors, the views of a free object. Contention between processes is in
// cli_primitives_backends_test.cc.
#include <signal.h>

#include <string>
#include <vector>

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
using ::testing::MatchesRegex;

Result Dl(std::vector<std::string> args) {
  args.insert(args.begin() + 1, {"--backend", "memory://"});
  return RunProcess(Dlock(std::move(args)));
}

constexpr char kShowLock[] =
    "echo \"$DLOCK_LOCK_NAME $DLOCK_FENCING_TOKEN $DLOCK_PERMIT_SLOTS\"";

TEST(CliPrimitivesTest, PermitsRunSeesItsSlotsAndToken) {
  Result r = Dl({"run", "--permits", "3", "--take", "2", "jobs", "--", "sh",
                 "-c", kShowLock});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "jobs 1 0,1\n");
  // The command's status is dlock's, as for a lock.
  EXPECT_EQ(Dl({"run", "--permits", "1", "j", "--", "sh", "-c", "exit 4"}).code,
            4);
}

TEST(CliPrimitivesTest, SharedRunIsAReaderWithAToken) {
  Result r = Dl({"run", "--shared", "catalog", "--", "sh", "-c", kShowLock});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "catalog 1 \n");
}

TEST(CliPrimitivesTest, AllRunSeesEveryNameAndTokenInOrder) {
  // Names may hold spaces and commas: newline-separated.
  Result r = Dl({"run", "--all", "b", "a, c", "--", "sh", "-c",
                 "printf '%s|%s|%s' \"$DLOCK_LOCK_NAMES\" "
                 "\"$DLOCK_FENCING_TOKENS\" \"${DLOCK_LOCK_NAME-unset}\""});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out,
              MatchesRegex("b\na, c\\|[1-9][0-9]*\n[1-9][0-9]*\\|unset"));
}

TEST(CliPrimitivesTest, ElectRunsTheCommandAsLeader) {
  Result r =
      Dl({"elect", "--value", "10.0.0.7:80", "scheduler", "--", "sh", "-c",
          "echo \"$DLOCK_ELECTION $DLOCK_LEADER_TERM "
          "$DLOCK_LEADER_VALUE\"; exit 3"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.out, "scheduler 1 10.0.0.7:80\n");
  // The default value names this host and dlock's pid.
  Result d = Dl({"elect", "e", "--", "sh", "-c", "echo $DLOCK_LEADER_VALUE"});
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_THAT(d.out, HasSubstr(":"));
}

TEST(CliPrimitivesTest, LeaderOfAnElectionWithoutOne) {
  Result text = Dl({"leader", "scheduler"});
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_EQ(text.out, "no leader\n");
  Result json = Dl({"leader", "--json", "scheduler"});
  EXPECT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(json.out, "{\"name\":\"scheduler\",\"leader\":null}\n");
}

TEST(CliPrimitivesTest, LeaderWatchPrintsTheLeaderAndEndsOnSigint) {
  test::Process watch(
      Dlock({"leader", "--backend", "memory://", "--watch", "scheduler"}));
  ASSERT_OK(test::WaitUntil([&] { return !watch.out().empty(); },
                            absl::Seconds(10), "the first line"));
  EXPECT_EQ(watch.out(), "no leader\n");
  // Still watching: it ends on SIGINT only, with 0.
  EXPECT_EQ(watch.Wait(absl::Milliseconds(200)), -1);
  watch.Signal(SIGINT);
  EXPECT_EQ(watch.Wait(absl::Seconds(10)), 0) << watch.err();
  EXPECT_EQ(watch.err(), "");
}

TEST(CliPrimitivesTest, ViewsOfKindsWithNothingHeld) {
  EXPECT_EQ(Dl({"list", "--kind", "semaphore"}).out, "no semaphores held\n");
  EXPECT_EQ(Dl({"list", "--kind", "election", "--json"}).out, "[]\n");
  EXPECT_EQ(Dl({"status", "--json", "jobs"}).out,
            "{\"name\":\"jobs\",\"locked\":false}\n");
  Result unlock = Dl({"unlock", "--force", "--kind", "sem", "jobs"});
  EXPECT_EQ(unlock.code, 0) << unlock.err;
  EXPECT_EQ(unlock.out, "jobs: unlocked semaphore (was 0/0 permits)\n");
}

TEST(CliPrimitivesTest, UsageErrorsExit64WithOneLine) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"run", "a", "b", "--", "true"}, "add --all"},
      {{"run", "--all", "a", "b"}, "--all takes the names up to --"},
      {{"run", "--shared", "--permits", "2", "n", "--", "true"},
       "exclude each other"},
      {{"run", "--all", "--once-per", "1h", "a", "--", "true"},
       "exclude each other"},
      {{"run", "--take", "2", "n", "--", "true"}, "give --permits N"},
      {{"run", "--permits", "2", "--take", "3", "n", "--", "true"},
       "--take 3 asks more"},
      {{"run", "--permits", "0", "n", "--", "true"}, "--permits"},
      {{"run", "--all", "a", "a", "--", "true"}, "a"},
      {{"elect", "a", "b", "--", "true"}, "one election name"},
      {{"list", "--kind", "queue"}, "--kind: 'queue' is not a kind"},
      {{"unlock", "--force", "--kind", "queue", "n"}, "--kind"},
  };
  for (const auto& [args, says] : cases) {
    Result r = Dl(args);
    EXPECT_EQ(r.code, 64) << args[0] << " " << args[1] << ": " << r.err;
    ExpectOneLine(r);
    EXPECT_THAT(r.err, HasSubstr(says)) << args[1];
    EXPECT_EQ(r.out, "") << "the command must not run: " << args[1];
  }
}

}  // namespace
}  // namespace dlock
