// The `dlock` binary end to end across processes, on every server backend
// of this build (backend_servers.h): ten concurrent runs on one file, exit
// codes for timeout and lost lock, signals, a SIGKILLed run, status, list
// and unlock. One ctest entry per binary, so each server starts once.
#include <signal.h>

#include <atomic>
#include <iostream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "backend_servers.h"
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
using test::RunShell;
using ::testing::HasSubstr;
using ::testing::Not;

class CliBackendTest : public ::testing::TestWithParam<test::ServerBackend> {
 protected:
  void SetUp() override {
    static std::atomic<int> n{0};
    ns_ = absl::StrCat("cli", n++);
    absl::StatusOr<std::string> dir = test::MakeTempDir("dlock-cli");
    ASSERT_OK(dir);
    dir_ = *dir;
  }
  void TearDown() override { test::RemoveTree(dir_); }

  std::vector<std::string> Env() const {
    return {absl::StrCat("DLOCK_BACKEND=", GetParam().uri(ns_))};
  }
  Result Dl(std::vector<std::string> args,
            absl::Duration timeout = absl::Seconds(60)) {
    return RunProcess(Dlock(std::move(args)), Env(), timeout);
  }
  std::unique_ptr<Process> Start(std::vector<std::string> args) {
    return std::make_unique<Process>(Dlock(std::move(args)), Env());
  }
  // Waits until `name` is held (by the process just started).
  void AwaitLocked(const std::string& name) {
    ASSERT_OK(test::WaitUntil(
        [&] {
          return absl::StrContains(Dl({"status", name}).out, ": locked");
        },
        absl::Seconds(10), absl::StrCat(name, " locked")));
  }

  // Waits until the command has written its pid: the lock is granted before
  // the command starts, and a dlock killed in between takes the command
  // with it before it has written anything.
  static void AwaitPidFile(const std::string& pid_file) {
    ASSERT_OK(test::WaitUntil(
        [&] {
          return absl::StrContains(test::ReadFileOrEmpty(pid_file), "\n");
        },
        absl::Seconds(10), "the command's pid"));
  }

  // The command whose pid is in `pid_file` ends soon: its dlock was killed
  // and the kernel sent it the lost signal (PR_SET_PDEATHSIG).
  static void ExpectOrphanEnds(const std::string& pid_file) {
    const std::string pid = test::ReadFileOrEmpty(pid_file);
    ASSERT_FALSE(pid.empty());
    EXPECT_OK(test::WaitUntil([&] { return kill(std::stoi(pid), 0) != 0; },
                              absl::Seconds(5), "the orphaned command to end"));
  }

  std::string ns_;
  std::string dir_;
};

TEST_P(CliBackendTest, TenConcurrentRunsNeverInterleave) {
  const std::string file = dir_ + "/log";
  std::vector<std::unique_ptr<Process>> runs;
  for (int i = 0; i < 10; ++i) {
    runs.push_back(Start(
        {"run", "--wait", "60s", "shared-file", "--", "sh", "-c",
         absl::StrCat("echo \"begin ", i, "\" >> ", file, "; sleep 0.05; ",
                      "echo \"end ", i, "\" >> ", file)}));
  }
  for (auto& run : runs) EXPECT_EQ(run->Wait(), 0) << run->err();
  std::vector<std::string> lines =
      absl::StrSplit(test::ReadFileOrEmpty(file), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 20u);
  for (size_t i = 0; i < lines.size(); i += 2) {
    ASSERT_TRUE(absl::StartsWith(lines[i], "begin ")) << lines[i];
    EXPECT_EQ(lines[i + 1], absl::StrCat("end ", lines[i].substr(6)));
  }
}

TEST_P(CliBackendTest, NotAcquiredWithinWaitExits75AndLeavesNothing) {
  std::unique_ptr<Process> holder = Start({"run", "busy", "--", "sleep", "30"});
  AwaitLocked("busy");
  const std::string before = Dl({"status", "--json", "busy"}).out;
  const absl::Time start = absl::Now();
  Result r = Dl({"run", "--wait", "300ms", "busy", "--", "true"});
  EXPECT_EQ(r.code, 75) << r.err;
  // Said once while waiting, then why it gave up: two lines, both naming
  // the holder, and no error kind's payload.
  const std::vector<std::string> lines =
      absl::StrSplit(r.err, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << r.err;
  EXPECT_TRUE(absl::StartsWith(
      lines[0], "dlock: waiting for lock 'busy', held by t:dlock-run:"))
      << r.err;
  EXPECT_TRUE(absl::EndsWith(lines[0], "), for up to 300ms (--wait)")) << r.err;
  EXPECT_TRUE(absl::StartsWith(
      lines[1],
      "dlock: lock 'busy' not acquired within 300ms; held by t:dlock-run:"))
      << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("type.dlock.dev")));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  Result quiet =
      Dl({"run", "--quiet", "--wait", "300ms", "busy", "--", "true"});
  EXPECT_EQ(quiet.code, 75);
  ExpectOneLine(quiet);
  Result once = Dl({"run", "--wait", "0", "busy", "--", "true"});
  EXPECT_EQ(once.code, 75);
  ExpectOneLine(once);
  EXPECT_THAT(once.err,
              HasSubstr("dlock: lock 'busy' is held by t:dlock-run:"));
  EXPECT_THAT(once.err, HasSubstr("; --wait 0 tries once"));
  // The holder is untouched (same owner, same token).
  Result after = Dl({"status", "--json", "busy"});
  EXPECT_EQ(after.out.substr(0, after.out.find("\"lease_left_ms\"")),
            before.substr(0, before.find("\"lease_left_ms\"")));
  holder->Signal(SIGTERM);
  EXPECT_EQ(holder->Wait(), 128 + SIGTERM);  // forwarded to sleep
  EXPECT_THAT(Dl({"status", "busy"}).out, HasSubstr("busy: free"));
}

TEST_P(CliBackendTest, SignalsAreForwardedAndTheLockReleased) {
  std::unique_ptr<Process> run =
      Start({"run", "graceful", "--", "sh", "-c",
             "trap 'echo got TERM; exit 7' TERM; echo ready; "
             "while :; do sleep 0.05; done"});
  AwaitLocked("graceful");
  // The command sets its trap before it says so: a signal sooner would
  // end the shell before the trap exists.
  ASSERT_OK(
      test::WaitUntil([&] { return absl::StrContains(run->out(), "ready"); },
                      absl::Seconds(10), "the command's trap"));
  run->Signal(SIGTERM);
  EXPECT_EQ(run->Wait(), 7);
  EXPECT_THAT(run->out(), HasSubstr("got TERM"));
  EXPECT_THAT(Dl({"status", "graceful"}).out, HasSubstr("graceful: free"));
}

TEST_P(CliBackendTest, InterruptedWhileWaitingLeavesNothingBehind) {
  std::unique_ptr<Process> holder = Start({"run", "w", "--", "sleep", "30"});
  AwaitLocked("w");
  std::unique_ptr<Process> waiter = Start({"run", "w", "--", "true"});
  absl::SleepFor(absl::Milliseconds(300));
  waiter->Signal(SIGINT);
  EXPECT_EQ(waiter->Wait(), 128 + SIGINT);
  holder->Signal(SIGTERM);
  holder->Wait();
  // Nothing of the waiter is left (C9): the lock is free.
  EXPECT_THAT(Dl({"list", "--json"}).out, Not(HasSubstr("\"w\"")));
}

TEST_P(CliBackendTest, LostLockExits76AfterSignallingTheCommand) {
  std::unique_ptr<Process> run = Start(
      {"run", "--lease", "1s", "lost-one", "--", "sh", "-c",
       "trap 'echo stopping; exit 0' TERM; while :; do sleep 0.05; done"});
  AwaitLocked("lost-one");
  Result unlock = Dl({"unlock", "--force", "lost-one"});
  EXPECT_EQ(unlock.code, 0) << unlock.err;
  EXPECT_THAT(unlock.out, HasSubstr("unlocked (was held by t:dlock-run:"));
  const absl::Time unlocked = absl::Now();
  EXPECT_EQ(run->Wait(), 76) << run->err();
  // Noticed at the next renewal (a third of the lease); the bound is loose
  // because it also counts the command's exit on a loaded 2-core machine.
  EXPECT_LT(absl::Now() - unlocked, absl::Seconds(4));
  EXPECT_THAT(run->out(), HasSubstr("stopping"));
  EXPECT_THAT(run->err(), HasSubstr("lock 'lost-one' was lost"));
}

TEST_P(CliBackendTest, ACommandIgnoringSigtermIsKilledAfterKillAfter) {
  std::unique_ptr<Process> run =
      Start({"run", "--lease", "1s", "--kill-after", "1s", "stubborn", "--",
             "sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"});
  AwaitLocked("stubborn");
  // The lock is lost somewhere between the start of `dlock unlock` and its
  // exit: SIGKILL comes no sooner than 1 s after the one, and within the
  // bound after the other (the run may notice the loss before the unlock
  // process has exited).
  const absl::Time unlocking = absl::Now();
  ASSERT_EQ(Dl({"unlock", "--force", "stubborn"}).code, 0);
  const absl::Time unlocked = absl::Now();
  EXPECT_EQ(run->Wait(), 76) << run->err();
  EXPECT_GE(absl::Now() - unlocking, absl::Seconds(1));
  EXPECT_LT(absl::Now() - unlocked, absl::Seconds(6));
  EXPECT_THAT(run->err(), HasSubstr("sending SIGKILL"));
}

TEST_P(CliBackendTest, OnLostSignalIsConfigurable) {
  std::unique_ptr<Process> run = Start(
      {"run", "--lease", "1s", "--on-lost-signal", "USR1", "custom", "--", "sh",
       "-c",
       "trap 'echo got USR1; exit 0' USR1; while :; do sleep 0.05; done"});
  AwaitLocked("custom");
  ASSERT_EQ(Dl({"unlock", "--force", "custom"}).code, 0);
  EXPECT_EQ(run->Wait(), 76) << run->err();
  EXPECT_THAT(run->out(), HasSubstr("got USR1"));
}

TEST_P(CliBackendTest, ARunKilledWithSigkillFreesTheLockWithinItsLease) {
  const std::string pid_file = dir_ + "/child.pid";
  std::unique_ptr<Process> run =
      Start({"run", "--lease", "2s", "crashy", "--", "sh", "-c",
             absl::StrCat("echo $$ > ", pid_file, "; exec sleep 30")});
  AwaitLocked("crashy");
  AwaitPidFile(pid_file);
  run->Signal(SIGKILL);
  EXPECT_EQ(run->Wait(), 128 + SIGKILL);
  const absl::Time killed = absl::Now();
  Result next = Dl({"run", "--wait", "10s", "crashy", "--", "true"});
  EXPECT_EQ(next.code, 0) << next.err;
  // The lease (2 s), plus the start of a process, its session (ZooKeeper)
  // and a few round trips, on a loaded machine; a lock that never expired
  // would have made the run above time out (exit 75) after 10 s.
  EXPECT_LE(absl::Now() - killed, absl::Seconds(5));
  // The orphaned command was told too (PR_SET_PDEATHSIG), so it does not
  // go on working unprotected.
  ExpectOrphanEnds(pid_file);
}

// Issue 12: a ten-minute job's lock frees within the holder's liveness TTL
// (2 s in the URI) once dlock dies, not after the ten-minute lease.
TEST_P(CliBackendTest, ATenMinuteRunKilledWithSigkillFreesTheLockWithinItsTtl) {
  const std::vector<std::string> env = {
      absl::StrCat("DLOCK_BACKEND=", GetParam().short_liveness_uri(ns_))};
  const std::string pid_file = dir_ + "/child.pid";
  Process run(Dlock({"run", "--lease", "10m", "long-job", "--", "sh", "-c",
                     absl::StrCat("echo $$ > ", pid_file, "; exec sleep 60")}),
              env);
  AwaitLocked("long-job");
  AwaitPidFile(pid_file);
  run.Signal(SIGKILL);
  EXPECT_EQ(run.Wait(), 128 + SIGKILL);
  const absl::Time killed = absl::Now();
  Result next =
      RunProcess(Dlock({"run", "--wait", "30s", "long-job", "--", "true"}), env,
                 absl::Seconds(60));
  const absl::Duration took = absl::Now() - killed;
  std::cout << "CLI " << GetParam().label
            << " dlock run --lease 10m killed: the next run had the lock and "
               "was done "
            << took << " after the kill (liveness_ttl 2s)" << std::endl;
  EXPECT_EQ(next.code, 0) << next.err;
  // The TTL (2 s), plus the start of a process, its session (ZooKeeper)
  // and a few round trips, on a loaded machine: the same 3 s allowance as
  // for a 2 s lease above. The lease would have kept it ten minutes (the
  // run above would have given up after 30 s with exit 75).
  EXPECT_LE(took, absl::Seconds(5));
  ExpectOrphanEnds(pid_file);
}

TEST_P(CliBackendTest, StatusListUnlockInTextAndJson) {
  std::unique_ptr<Process> holder =
      Start({"run", "--lease", "1s", "reports/nightly", "--", "sleep", "30"});
  AwaitLocked("reports/nightly");
  Result status = Dl({"status", "--json", "reports/nightly"});
  EXPECT_EQ(status.code, 0);
  EXPECT_THAT(status.out,
              HasSubstr("{\"name\":\"reports/nightly\",\"locked\":true,"
                        "\"owner\":\"t:dlock-run:"));
  EXPECT_THAT(status.out, HasSubstr("\"fencing_token\":"));
  EXPECT_THAT(status.out, HasSubstr("\"lease_left_ms\":"));
  Result list = Dl({"list", "--prefix", "reports/"});
  EXPECT_EQ(list.code, 0);
  EXPECT_THAT(list.out, HasSubstr("reports/nightly"));
  EXPECT_THAT(Dl({"list", "--prefix", "other/"}).out,
              HasSubstr("no locks held"));
  Result json_list = Dl({"list", "--json"});
  EXPECT_TRUE(absl::StartsWith(json_list.out, "[{\"name\":\"reports/nightly\""))
      << json_list.out;
  Result unlock = Dl({"unlock", "--force", "--json", "reports/nightly"});
  EXPECT_THAT(unlock.out, HasSubstr("\"unlocked\":true,\"was_locked\":true"));
  EXPECT_EQ(holder->Wait(), 76);
  EXPECT_EQ(Dl({"status", "--json", "reports/nightly"}).out,
            "{\"name\":\"reports/nightly\",\"locked\":false}\n");
}

// A lock kept after its release (Hold::ReleaseAndKeepFor), here by a
// scheduled job's runner that has exited: held, by nobody.
TEST_P(CliBackendTest, StatusAndListShowALockKeptAfterRelease) {
  const std::string runs = dir_ + "/runs";
  Result ran = RunProcess({test::kJobRunnerPath, GetParam().uri(ns_), "nightly",
                           "s1", "60s", "60s", "0s", runs},
                          {}, absl::Seconds(60));
  ASSERT_EQ(ran.code, 0) << ran.err;
  Result status = Dl({"status", "nightly@s1"});
  EXPECT_EQ(status.code, 0);
  EXPECT_THAT(status.out, HasSubstr("nightly@s1: locked"));
  EXPECT_THAT(status.out, HasSubstr("holder:        (kept after release)"));
  Result json = Dl({"status", "--json", "nightly@s1"});
  EXPECT_THAT(json.out, HasSubstr("\"locked\":true,\"owner\":\"\","
                                  "\"kept_after_release\":true"));
  Result list = Dl({"list"});
  EXPECT_THAT(list.out, HasSubstr("(kept after release)"));
  Result unlock = Dl({"unlock", "--force", "nightly@s1"});
  EXPECT_THAT(unlock.out,
              HasSubstr("unlocked (was held by (kept after release)"));
  EXPECT_THAT(Dl({"status", "nightly@s1"}).out, HasSubstr("nightly@s1: free"));
}

// Issue 22: status and list say what the monitor knows. A killed holder's
// lock is free to take over long before its ten-minute lease ends, and the
// operator must see that instead of force-unlocking it.
TEST_P(CliBackendTest, StatusAndListSayWhenAKilledHoldersLockIsFreeToTakeOver) {
  const std::vector<std::string> env = {
      absl::StrCat("DLOCK_BACKEND=", GetParam().short_liveness_uri(ns_))};
  auto dl = [&](std::vector<std::string> args) {
    return RunProcess(Dlock(std::move(args)), env);
  };
  const std::string pid_file = dir_ + "/child.pid";
  Process run(Dlock({"run", "--lease", "10m", "dead-holder", "--", "sh", "-c",
                     absl::StrCat("echo $$ > ", pid_file, "; exec sleep 60")}),
              env);
  AwaitPidFile(pid_file);
  Result live = dl({"status", "dead-holder"});
  EXPECT_THAT(live.out, HasSubstr("dead-holder: locked\n")) << live.out;
  EXPECT_THAT(live.out, HasSubstr("  holder live:   yes\n")) << live.out;
  EXPECT_THAT(dl({"status", "--json", "dead-holder"}).out,
              HasSubstr("\"holder_live\":true,\"takeable\":false}"));
  run.Signal(SIGKILL);
  EXPECT_EQ(run.Wait(), 128 + SIGKILL);
  // The TTL is 2 s: within it, the monitor learns the holder is gone.
  Result json;
  ASSERT_OK(test::WaitUntil(
      [&] {
        json = dl({"status", "--json", "dead-holder"});
        return absl::StrContains(json.out, "\"takeable\":true") ||
               absl::StrContains(json.out, "\"locked\":false");
      },
      absl::Seconds(10), "the holder's liveness to lapse"))
      << json.out;
  if (GetParam().label == "zookeeper") {
    // Its holds live on the session, whose end removed the lock.
    EXPECT_THAT(dl({"status", "dead-holder"}).out,
                HasSubstr("dead-holder: free"));
  } else {
    EXPECT_THAT(json.out,
                HasSubstr("\"holder_live\":false,\"takeable\":true}"));
    Result text = dl({"status", "dead-holder"});
    EXPECT_THAT(text.out,
                HasSubstr("dead-holder: locked, free to take over: its holder "
                          "is not live\n"));
    EXPECT_THAT(text.out,
                HasSubstr("  holder live:   no (the next acquire takes the "
                          "lock over; no need for unlock --force)\n"));
    Result list = dl({"list"});
    EXPECT_THAT(list.out, HasSubstr("LIVE  HOLDER\n")) << list.out;
    EXPECT_THAT(list.out, HasSubstr("  no    t:dlock-run:")) << list.out;
    EXPECT_THAT(list.out, HasSubstr("LIVE no: the holder is gone")) << list.out;
    EXPECT_THAT(dl({"list", "--json"}).out, HasSubstr("\"takeable\":true"));
  }
  // And so it is: the next run takes it at once.
  Result next = dl({"run", "--wait", "0", "dead-holder", "--", "true"});
  EXPECT_EQ(next.code, 0) << next.err;
  ExpectOrphanEnds(pid_file);
}

// Issue 22: `dlock status JOB` tells whether the job's slot ran, runs or is
// free, where it said "free" about the job's name.
TEST_P(CliBackendTest, StatusOfAScheduledJobTellsItsSlot) {
  // The slot is this hour's: not across an hour's end.
  const absl::Duration into_hour =
      (absl::Now() - absl::UnixEpoch()) % absl::Hours(1);
  if (into_hour > absl::Minutes(59) + absl::Seconds(30)) {
    absl::SleepFor(absl::Hours(1) - into_hour + absl::Seconds(1));
  }
  Result ran = Dl({"run", "--once-per", "1h", "--at-least-for", "5m", "hourly",
                   "--", "true"});
  ASSERT_EQ(ran.code, 0) << ran.err;
  const std::string slot =
      absl::FormatTime("%Y-%m-%dT%H:00:00Z", absl::Now(), absl::UTCTimeZone());
  Result status = Dl({"status", "hourly"});
  EXPECT_EQ(status.code, 0);
  EXPECT_TRUE(absl::StartsWith(
      status.out, absl::StrCat("hourly: free as a lock; as a scheduled job:\n"
                               "  slot ",
                               slot, ": ran (closed for ")))
      << status.out;
  Result json = Dl({"status", "--json", "hourly"});
  EXPECT_THAT(json.out, HasSubstr("{\"name\":\"hourly\",\"locked\":false,"
                                  "\"job_slots\":[{\"name\":\"hourly@"));
  EXPECT_THAT(json.out, HasSubstr("\"slot_state\":\"ran\"}]}"));

  std::unique_ptr<Process> running =
      Start({"run", "--once-per", "1h", "daily-ish", "--", "sleep", "30"});
  ASSERT_OK(test::WaitUntil(
      [&] {
        return absl::StrContains(Dl({"status", "daily-ish"}).out,
                                 ": running (held by t:");
      },
      absl::Seconds(10), "the job's run"))
      << Dl({"status", "daily-ish"}).out;
  running->Signal(SIGTERM);
  running->Wait();
  // A name that is neither held nor a job stays plainly free.
  EXPECT_EQ(Dl({"status", "nothing"}).out, "nothing: free\n");
}

// Issue 22: a loss is said once, whichever way it is found.
TEST_P(CliBackendTest, ALossIsSaidOnce) {
  // The command runs dlock itself, so it asks for the backend: dlock run
  // hands its command no DLOCK_BACKEND otherwise (it may hold a password).
  Result r = Dl({"run", "--lease", "2s", "--pass-env", "DLOCK_BACKEND", "lossy",
                 "--", "sh", "-c",
                 absl::StrCat("'", test::kCliPath,
                              "' unlock --force lossy > /dev/null")});
  EXPECT_EQ(r.code, 76) << r.err;
  ExpectOneLine(r);
  auto count = [&](absl::string_view word) {
    return std::vector<absl::string_view>(absl::StrSplit(r.err, word)).size() -
           1;
  };
  EXPECT_EQ(count("lossy"), 1u) << r.err;
  EXPECT_EQ(count("lost"), 1u) << r.err;
}

// Issue 22: `dlock top` into a pipe prints whole names and no key hints.
TEST_P(CliBackendTest, TopIntoAPipePrintsWholeNames) {
  const std::string name =
      "a-very-long-lock-name-that-is-over-thirty-two-characters";
  std::unique_ptr<Process> holder = Start({"run", name, "--", "sleep", "30"});
  AwaitLocked(name);
  Result top =
      RunShell(absl::StrCat("'", test::kCliPath, "' top | cat"), Env());
  EXPECT_EQ(top.code, 0) << top.err;
  EXPECT_THAT(top.out, HasSubstr(absl::StrCat("\n", name, "  t:dlock-run:")));
  EXPECT_THAT(top.out, Not(HasSubstr("keys:")));
  Result list = Dl({"list"});
  const std::vector<std::string> lines =
      absl::StrSplit(list.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << list.out;
  // The columns line up however long the name.
  EXPECT_EQ(lines[0].find("FENCING-TOKEN"), name.size() + 2) << list.out;
  holder->Signal(SIGTERM);
  holder->Wait();
}

INSTANTIATE_TEST_SUITE_P(
    Backends, CliBackendTest, ::testing::ValuesIn(test::ServerBackends()),
    [](const ::testing::TestParamInfo<test::ServerBackend>& info) {
      return info.param.label;
    });

}  // namespace
}  // namespace dlock
