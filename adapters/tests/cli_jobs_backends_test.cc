// `dlock run` as a scheduled job across processes, on every server
// configuration of this build that clients in separate processes share:
// timers on several machines start the same job, some late, some with
// clocks apart, and the job runs once per slot; a stuck run is stopped and
// its slot runs again. Each process exits right after its run or skip: the
// slot stays closed on the backend, not in a process that lingers.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "status_testing.h"
#include "test_servers.h"
#include "test_servers_gtest.h"
#include "test_util.h"

namespace dlock {
namespace {

using test::Process;
using ::testing::AnyOf;
using ::testing::HasSubstr;

// Exit codes of docs/cli.md.
constexpr int kRan = 0;
constexpr int kSkippedRunning = 75;
constexpr int kStopped = 76;
constexpr int kSkippedRan = 79;

constexpr char kFakeTime[] =
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

// Slots of 4 s: long enough for ten processes to start in one, short enough
// for CI.
constexpr absl::Duration kPeriod = absl::Seconds(4);
// How long any process may take to start, do its one attempt and exit.
constexpr absl::Duration kExitBound = absl::Seconds(20);

std::vector<test::TestBackend> Backends() {
  return test::TestBackends({.across_processes = true});
}

class CliJobsTest : public ::testing::TestWithParam<test::TestBackend> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = test::MakeTempDir("dlock-jobs");
    ASSERT_OK(dir);
    dir_ = *dir;
    // Configurations of one server (postgres lease and session) share its
    // locks: a namespace of each test's own.
    static int n = 0;
    backend_ = test::UriForTest(GetParam(), absl::StrCat("jobs", n++));
  }
  void TearDown() override { test::RemoveTree(dir_); }

  // `dlock run <flags> <job> -- sh -c 'echo <slot> >> <dir>/<job>; <then>'`
  // with the local clock moved by `offset` (libfaketime: the wall clock
  // only; leases keep the monotonic clock).
  std::unique_ptr<Process> StartJob(
      const std::vector<std::string>& flags, const std::string& job,
      const std::string& then = "true",
      absl::Duration offset = absl::ZeroDuration()) {
    std::vector<std::string> args = {"run"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {job, "--", "sh", "-c",
                             absl::StrCat("echo \"$DLOCK_JOB_SLOT\" >> ", dir_,
                                          "/", job, "; ", then)});
    std::vector<std::string> env = {absl::StrCat("DLOCK_BACKEND=", backend_)};
    if (offset != absl::ZeroDuration()) {
      env.push_back(absl::StrCat("LD_PRELOAD=", kFakeTime));
      env.push_back(
          absl::StrCat("FAKETIME=", offset > absl::ZeroDuration() ? "+" : "-",
                       absl::ToDoubleSeconds(absl::AbsDuration(offset))));
      env.push_back("FAKETIME_DONT_FAKE_MONOTONIC=1");
    }
    return std::make_unique<Process>(test::Dlock(args), env);
  }

  // The slots `job` ran in, one line per run.
  std::vector<std::string> Runs(const std::string& job) {
    return absl::StrSplit(test::ReadFileOrEmpty(dir_ + "/" + job), '\n',
                          absl::SkipEmpty());
  }

  std::string dir_;
  std::string backend_;
};

// The start of a slot at least `lead` from now.
absl::Time NextSlotStart(absl::Duration lead) {
  const absl::Time earliest = absl::Now() + lead;
  const int64_t p = absl::ToInt64Seconds(kPeriod);
  const int64_t s = absl::ToUnixSeconds(earliest);
  return absl::FromUnixSeconds((s / p + 1) * p);
}

void SleepUntil(absl::Time t) {
  const absl::Duration left = t - absl::Now();
  if (left > absl::ZeroDuration()) absl::SleepFor(left);
}

std::string SlotId(absl::Time start) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", start, absl::UTCTimeZone());
}

// One timeline per backend, three jobs side by side to keep CI short:
//   "timers": 5 runs started together at a slot's start, then 5 more one by
//     one over the slot, as late timers would: one run in the slot. The
//     last starts 1.3 s before the slot ends: a process reads the clock
//     once it has loaded, which on a loaded CI machine took over 0.5 s, and
//     a timer that reads it in the next slot rightly runs that slot.
//   "skewed": a machine whose clock is 1.5 s ahead runs the slot as it
//     begins by its clock; one whose clock is 1.5 s behind starts it again
//     after the slot ended here (3 s apart, --at-least-for 3.5s) and skips;
//     a machine with the right clock runs the next slot.
//   "stuck": a run longer than --at-most-for is stopped (76), and the slot
//     then runs again elsewhere.
TEST_P(CliJobsTest, OneRunPerSlotAcrossLateTimersSkewedClocksAndStuckRuns) {
  const absl::Time slot = NextSlotStart(absl::Seconds(2));
  const std::vector<std::string> timers = {"--once-per", "4s", "--at-least-for",
                                           "1s"};
  const std::vector<std::string> skewed = {"--once-per", "4s", "--at-least-for",
                                           "3.5s"};
  const std::vector<std::string> stuck = {
      "--slot", "nightly", "--at-most-for", "2s", "--kill-after", "1s"};

  SleepUntil(slot - absl::Seconds(1.2));
  std::unique_ptr<Process> ahead =
      StartJob(skewed, "skewed", "true", absl::Seconds(1.5));

  SleepUntil(slot + absl::Milliseconds(200));
  std::unique_ptr<Process> stuck_run = StartJob(stuck, "stuck", "sleep 30");
  std::vector<std::unique_ptr<Process>> together;
  for (int i = 0; i < 5; ++i) {
    together.push_back(StartJob(timers, "timers", "sleep 0.5"));
  }
  std::vector<std::unique_ptr<Process>> late;
  for (int i = 1; i <= 5; ++i) {
    SleepUntil(slot + absl::Milliseconds(200 + 500 * i));
    late.push_back(StartJob(timers, "timers", "sleep 0.5"));
  }
  // The stuck run was stopped at --at-most-for; its slot runs again.
  EXPECT_EQ(stuck_run->Wait(kExitBound), kStopped) << stuck_run->err();
  EXPECT_THAT(stuck_run->err(), HasSubstr("--at-most-for"));
  std::unique_ptr<Process> again = StartJob(stuck, "stuck");
  EXPECT_EQ(again->Wait(kExitBound), kRan) << again->err();

  // 0.5 s after this slot ended here: 3 s earlier on the slow clock.
  SleepUntil(slot + kPeriod + absl::Milliseconds(500));
  std::unique_ptr<Process> behind =
      StartJob(skewed, "skewed", "true", -absl::Seconds(1.5));
  std::unique_ptr<Process> on_time = StartJob(skewed, "skewed");

  int ran = 0;
  for (auto& p : together) {
    const int code = p->Wait(kExitBound);
    EXPECT_THAT(code, AnyOf(kRan, kSkippedRunning, kSkippedRan)) << p->err();
    ran += code == kRan;
  }
  std::vector<int> late_codes;
  for (auto& p : late) {
    late_codes.push_back(p->Wait(kExitBound));
    EXPECT_THAT(late_codes.back(), AnyOf(kRan, kSkippedRunning, kSkippedRan))
        << p->err();
    ran += late_codes.back() == kRan;
  }
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(Runs("timers"), std::vector<std::string>{SlotId(slot)});
  // The last timer came about 2 s after the run ended and its process
  // exited, past --at-least-for: the slot stayed closed on the backend.
  EXPECT_EQ(late_codes.back(), kSkippedRan) << late.back()->err();
  EXPECT_THAT(late.back()->err(), HasSubstr("already ran in this slot"));

  EXPECT_EQ(ahead->Wait(kExitBound), kRan) << ahead->err();
  EXPECT_EQ(behind->Wait(kExitBound), kSkippedRan) << behind->err();
  EXPECT_EQ(on_time->Wait(kExitBound), kRan) << on_time->err();
  EXPECT_EQ(Runs("skewed"),
            (std::vector<std::string>{SlotId(slot), SlotId(slot + kPeriod)}));
  EXPECT_EQ(Runs("stuck"), (std::vector<std::string>{"nightly", "nightly"}));
}

TEST_P(CliJobsTest, QuietSkipsExitZeroAndPrintNothing) {
  const std::vector<std::string> flags = {
      "--slot",         "quiet", "--at-most-for", "1m",
      "--at-least-for", "1m",    "--quiet-skip"};
  std::unique_ptr<Process> first = StartJob(flags, "quiet");
  ASSERT_EQ(first->Wait(kExitBound), kRan) << first->err();
  std::unique_ptr<Process> second = StartJob(flags, "quiet");
  EXPECT_EQ(second->Wait(kExitBound), 0);  // skipped, quietly
  EXPECT_EQ(second->out(), "");
  EXPECT_EQ(second->err(), "");
  EXPECT_EQ(Runs("quiet").size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Backends, CliJobsTest, ::testing::ValuesIn(Backends()),
                         [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace dlock
