// Copyright dlock authors. `dlock run --wait 60s` rides out a Sentinel
// failover (issue 19 §6): runs follow each other on one lock from four
// loops while the master is killed with SIGKILL, the Sentinels promote the
// replica and the killed server comes back as its replica (wait_replicas=1
// needs one). No run exits with an error, the commands never interleave,
// and the fencing tokens they see keep rising. Before, every run that was
// waiting when the master died exited with 69 ("cannot connect to redis at
// master ...: Connection refused").
#include <algorithm>
#include <atomic>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "redis_sentinel_group.h"
#include "server_process.h"
#include "status_testing.h"
#include "test_util.h"

namespace dlock {
namespace {

using test::Dlock;
using test::RedisSentinelGroup;
using test::Result;
using test::RunProcess;

constexpr int kLoops = 4;

TEST(CliSentinelFailover, WaitingRunsRideOutTheMastersDeath) {
  absl::StatusOr<std::unique_ptr<RedisSentinelGroup>> group =
      RedisSentinelGroup::Start();
  ASSERT_OK(group);
  absl::StatusOr<std::string> dir = test::MakeTempDir("dlock-failover");
  ASSERT_OK(dir);
  const std::string log = *dir + "/log";
  const std::string uri = absl::StrCat(
      "redis-sentinel://", (*group)->SentinelUri(), "/",
      (*group)->master_name(),
      "?namespace=cli-ride-out&wait_replicas=1&wait_timeout=500ms");
  const std::vector<std::string> env = {"DLOCK_BACKEND=" + uri};

  std::atomic<bool> stop{false};
  std::atomic<int> runs{0};
  absl::Mutex mu;
  std::vector<std::string> failures;  // guarded by mu
  std::vector<std::thread> loops;
  for (int i = 0; i < kLoops; ++i) {
    loops.emplace_back([&, i] {
      while (!stop) {
        const Result r = RunProcess(
            Dlock({"run", "--wait", "60s", "--lease", "3s", "ridden", "--",
                   "sh", "-c",
                   absl::StrCat("echo \"begin ", i,
                                " $DLOCK_FENCING_TOKEN\" >> ", log,
                                "; sleep 0.1; echo \"end ", i, "\" >> ", log)}),
            env, absl::Seconds(90));
        ++runs;
        if (r.code != 0) {
          absl::MutexLock lock(&mu);
          failures.push_back(absl::StrCat("exit ", r.code, ": ", r.err));
        }
      }
    });
  }
  auto wait_for_runs = [&](int count) {
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (runs < count && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    return runs >= count;
  };
  EXPECT_TRUE(wait_for_runs(kLoops)) << "the runs never got going";
  absl::StatusOr<int> old_master = (*group)->CurrentMasterPort();
  ASSERT_OK(old_master);
  const absl::Time killed = absl::Now();
  const int before = runs;
  ASSERT_OK((*group)->KillMaster());
  ASSERT_OK((*group)->WaitForFailoverFrom(*old_master)) << (*group)->LogTails();
  ASSERT_OK((*group)->RestartKilled()) << (*group)->LogTails();
  const absl::Time settled = absl::Now();
  EXPECT_TRUE(wait_for_runs(before + 3 * kLoops))
      << "the runs stopped after the failover";
  stop = true;
  for (std::thread& t : loops) t.join();
  // No run left the lock to its lease: a release that met the failover was
  // tried again before the run exited.
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
  ASSERT_OK(client);
  absl::StatusOr<LockInfo> info = (*client)->Admin().Inspect("ridden");
  ASSERT_OK(info);
  EXPECT_FALSE(info->locked) << "left held by " << info->owner;

  // Each command ran alone, and with a larger token than the one before.
  std::vector<std::string> lines =
      absl::StrSplit(test::ReadFileOrEmpty(log), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size() % 2, 0u);
  uint64_t last_token = 0;
  int regressions = 0;
  for (size_t i = 0; i < lines.size(); i += 2) {
    std::vector<std::string> begin = absl::StrSplit(lines[i], ' ');
    ASSERT_EQ(begin.size(), 3u) << lines[i];
    ASSERT_EQ(begin[0], "begin");
    EXPECT_EQ(lines[i + 1], absl::StrCat("end ", begin[1]))
        << "two commands interleaved";
    uint64_t token = 0;
    ASSERT_TRUE(absl::SimpleAtoi(begin[2], &token)) << lines[i];
    if (token <= last_token) ++regressions;
    last_token = token;
  }
  EXPECT_EQ(regressions, 0);
  absl::MutexLock lock(&mu);
  std::cout << "FAILOVER cli sentinel, " << kLoops
            << " loops of dlock run --wait 60s, wait_replicas=1: runs " << runs
            << " (" << runs - before << " from the kill), "
            << "failover and replica back "
            << absl::FormatDuration(
                   absl::Trunc(settled - killed, absl::Milliseconds(1)))
            << " after the kill, error exits " << failures.size()
            << ", token regressions " << regressions << std::endl;
  EXPECT_TRUE(failures.empty())
      << failures.size() << " runs failed, first: " << failures.front();
  test::RemoveTree(*dir);
}

}  // namespace
}  // namespace dlock
