// `dlock run --permits/--shared/--all`, `dlock elect` and `dlock leader`
// between processes, on a throwaway Redis server (the CLI is the same on
// every backend; each backend's primitives are proved by the conformance
// suite). Where the backend does not offer a primitive yet, the case
// checks that the CLI says so and runs nothing; once it does, the
// contention between processes.
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backend_servers.h"
#include "dlock/client.h"
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

class CliPrimitivesBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int n = 0;
    for (const test::ServerBackend& backend : test::ServerBackends()) {
      if (backend.label == "redis") uri_ = backend.uri(absl::StrCat("p", n++));
    }
    ASSERT_FALSE(uri_.empty()) << "this build has no redis backend";
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri_);
    ASSERT_OK(client);
    traits_ = (*client)->traits();
  }

  Result Dl(std::vector<std::string> args) {
    return RunProcess(Dlock(std::move(args)), Env(), absl::Seconds(30));
  }
  std::unique_ptr<Process> Start(std::vector<std::string> args) {
    return std::make_unique<Process>(Dlock(std::move(args)), Env());
  }
  void AwaitOutput(const std::vector<std::string>& args,
                   const std::string& says) {
    ASSERT_OK(
        test::WaitUntil([&] { return absl::StrContains(Dl(args).out, says); },
                        absl::Seconds(10), says));
  }
  // The backend refuses the primitive: the CLI says so in one line, exit 1,
  // and the command never runs.
  void ExpectNotOffered(std::vector<std::string> args) {
    Result r = Dl(std::move(args));
    EXPECT_EQ(r.code, 1) << r.err;
    ExpectOneLine(r);
    EXPECT_EQ(r.out, "");
  }
  std::vector<std::string> Env() const {
    return {absl::StrCat("DLOCK_BACKEND=", uri_)};
  }

  std::string uri_;
  BackendTraits traits_;
};

TEST_F(CliPrimitivesBackendTest, TwoPermitsLetTwoRunsInAndTheThirdWaits) {
  if (!traits_.semaphores) {
    ExpectNotOffered({"run", "--permits", "2", "sem", "--", "echo", "ran"});
    return;
  }
  auto first = Start({"run", "--permits", "2", "sem", "--", "sleep", "30"});
  // Renewed every 300 ms, so that the force unlock below is found soon.
  auto second = Start({"run", "--permits", "2", "--lease", "900ms", "sem", "--",
                       "sleep", "30"});
  AwaitOutput({"status", "sem"}, "2/2 permits");
  Result third =
      Dl({"run", "--permits", "2", "--wait", "0", "sem", "--", "echo", "ran"});
  EXPECT_EQ(third.code, 75) << third.err;
  EXPECT_THAT(third.err, HasSubstr("semaphore 'sem' is "));
  // Another N while these hold: refused by the object's configuration.
  Result other_n =
      Dl({"run", "--permits", "3", "--wait", "0", "sem", "--", "echo", "ran"});
  EXPECT_EQ(other_n.code, 77) << other_n.err;
  EXPECT_THAT(Dl({"list", "--kind", "semaphore"}).out,
              HasSubstr("sem   sem   2/2 permits"));
  // A permit given back lets a waiter in.
  first->Signal(SIGTERM);
  Result waited = Dl(
      {"run", "--permits", "2", "--wait", "10s", "sem", "--", "echo", "ran"});
  EXPECT_EQ(waited.code, 0) << waited.err;
  EXPECT_EQ(waited.out, "ran\n");
  // An operator removes the semaphore's holds: the holder left is told,
  // its command stopped, and dlock exits 76.
  Result unlock = Dl({"unlock", "--force", "--kind", "semaphore", "sem"});
  EXPECT_EQ(unlock.code, 0) << unlock.err;
  EXPECT_THAT(unlock.out, HasSubstr("sem: unlocked semaphore (was 1/2"));
  EXPECT_EQ(second->Wait(absl::Seconds(30)), 76) << second->err();
}

TEST_F(CliPrimitivesBackendTest, ReadersRunTogetherAndAWriterIsKeptOut) {
  if (!traits_.read_write_locks) {
    ExpectNotOffered({"run", "--shared", "rw", "--", "echo", "ran"});
    return;
  }
  auto reader = Start({"run", "--shared", "rw", "--", "sleep", "30"});
  AwaitOutput({"status", "rw"}, "1 reader");
  Result another =
      Dl({"run", "--shared", "--wait", "0", "rw", "--", "echo", "ran"});
  EXPECT_EQ(another.code, 0) << another.err;
  EXPECT_EQ(another.out, "ran\n");
  Result writer = Dl({"run", "--wait", "0", "rw", "--", "echo", "ran"});
  EXPECT_EQ(writer.code, 75) << writer.err;
  EXPECT_EQ(writer.out, "");
  reader->Signal(SIGTERM);
  EXPECT_EQ(reader->Wait(absl::Seconds(10)), 128 + SIGTERM);
  EXPECT_EQ(Dl({"run", "--wait", "10s", "rw", "--", "echo", "ran"}).out,
            "ran\n");
}

// `unlock --force NAME` ends the readers too (C23): the CLI says whom it
// removed, not "was not locked" (the lock view shows a writer only).
TEST_F(CliPrimitivesBackendTest, ForceUnlockByNameEndsTheReadersAndSaysSo) {
  if (!traits_.read_write_locks) return;  // the case above covers the refusal
  // Renewed every 300 ms, so that the force unlock below is found soon.
  auto reader = Start(
      {"run", "--shared", "--lease", "900ms", "readers", "--", "sleep", "30"});
  AwaitOutput({"status", "readers"}, "1 reader");
  Result unlock = Dl({"unlock", "--force", "readers"});
  EXPECT_EQ(unlock.code, 0) << unlock.err;
  EXPECT_THAT(unlock.out, HasSubstr("readers: unlocked (was 1 reader"));
  EXPECT_EQ(reader->Wait(absl::Seconds(30)), 76) << reader->err();
}

TEST_F(CliPrimitivesBackendTest, ALeaderIsShownAndASecondCampaignerWaits) {
  if (!traits_.elections) {
    ExpectNotOffered({"elect", "e", "--", "echo", "ran"});
    Result leader = Dl({"leader", "e"});
    EXPECT_EQ(leader.code, 1) << leader.err;
    return;
  }
  // A watcher prints the leader now and at each change, woken by the
  // backend.
  auto watch = Start({"leader", "--watch", "--json", "e"});
  ASSERT_OK(test::WaitUntil([&] { return !watch->out().empty(); },
                            absl::Seconds(10), "the watcher's first line"));
  EXPECT_EQ(watch->out(), "{\"name\":\"e\",\"leader\":null}\n");
  auto leader = Start({"elect", "--value", "a:1", "e", "--", "sleep", "30"});
  AwaitOutput({"leader", "e"}, "value a:1");
  ASSERT_OK(test::WaitUntil(
      [&] { return absl::StrContains(watch->out(), "\"value\":\"a:1\""); },
      absl::Seconds(10), "the watcher to print the new leader"));
  watch->Signal(SIGINT);
  EXPECT_EQ(watch->Wait(absl::Seconds(10)), 0) << watch->err();
  Result json = Dl({"leader", "--json", "e"});
  EXPECT_THAT(json.out, HasSubstr("{\"name\":\"e\",\"leader\":{\"owner\":"));
  EXPECT_THAT(json.out, HasSubstr("\"value\":\"a:1\",\"term\":"));
  Result second =
      Dl({"elect", "--wait", "0", "--value", "b:2", "e", "--", "echo", "ran"});
  EXPECT_EQ(second.code, 75) << second.err;
  EXPECT_THAT(second.err, HasSubstr("led by"));
  leader->Signal(SIGTERM);
  EXPECT_EQ(leader->Wait(absl::Seconds(10)), 128 + SIGTERM);
  EXPECT_EQ(Dl({"leader", "e"}).out, "no leader\n");
}

TEST_F(CliPrimitivesBackendTest, AllTakesEveryNameOrNone) {
  auto holder = Start({"run", "b", "--", "sleep", "30"});
  AwaitOutput({"status", "b"}, ": locked");
  Result busy =
      Dl({"run", "--all", "--wait", "0", "a", "b", "--", "echo", "ran"});
  EXPECT_EQ(busy.code, 75) << busy.err;
  EXPECT_THAT(busy.err, HasSubstr("locks 'a', 'b'"));
  EXPECT_EQ(busy.out, "");
  // Nothing left half taken.
  EXPECT_THAT(Dl({"status", "a"}).out, HasSubstr("a: free"));
  holder->Signal(SIGTERM);
  Result all = Dl({"run", "--all", "--wait", "10s", "b", "a", "--", "sh", "-c",
                   "echo \"$DLOCK_LOCK_NAMES\""});
  EXPECT_EQ(all.code, 0) << all.err;
  EXPECT_EQ(all.out, "b\na\n");
}

}  // namespace
}  // namespace dlock
