// The scheduled-job guard with nodes in separate processes (the
// dlock_job_runner helper), on every server backend of this build.
#include <algorithm>
#include <vector>

#include "absl/time/clock.h"
#include "backend_servers.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "status_testing.h"
#include "test_util.h"

namespace dlock {
namespace {

class JobGuardProcessTest
    : public ::testing::TestWithParam<test::ServerBackend> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = test::MakeTempDir("dlock-jobs");
    ASSERT_OK(dir);
    dir_ = *dir;
  }
  void TearDown() override { test::RemoveTree(dir_); }

  std::unique_ptr<test::Process> Node(const std::string& ns,
                                      const std::string& at_least,
                                      const std::string& job_time) {
    return std::make_unique<test::Process>(std::vector<std::string>{
        test::kJobRunnerPath, GetParam().uri(ns), "nightly-report",
        "2026-11-22T01:00Z", "30s", at_least, job_time, dir_ + "/runs"});
  }
  int Runs() {
    const std::string text = test::ReadFileOrEmpty(dir_ + "/runs");
    return std::count(text.begin(), text.end(), '\n');
  }

  std::string dir_;
};

TEST_P(JobGuardProcessTest, FiveProcessesSharingASlotRunTheJobOnce) {
  std::vector<std::unique_ptr<test::Process>> nodes;
  for (int i = 0; i < 5; ++i) nodes.push_back(Node("five", "2s", "300ms"));
  int ran = 0, skipped = 0;
  for (auto& node : nodes) {
    const int code = node->Wait();
    if (code == 0) ++ran;
    if (code == 3) ++skipped;
    EXPECT_TRUE(code == 0 || code == 3) << code << " " << node->err();
  }
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(skipped, 4);
  EXPECT_EQ(Runs(), 1);
}

TEST_P(JobGuardProcessTest, AnEarlyFinishDoesNotLetTheSlotRunTwice) {
  // The first node's job finishes in ~10ms and its process exits at once,
  // as one run from cron does; nodes that come later, within
  // lock_at_least_for of its start, must not run the slot again: the run
  // key stays kept on the backend after the process is gone.
  const absl::Time start = absl::Now();
  std::unique_ptr<test::Process> first = Node("early", "3s", "10ms");
  EXPECT_EQ(first->Wait(), 0) << first->err();
  EXPECT_EQ(Runs(), 1);
  for (int i = 0; i < 2; ++i) {
    std::unique_ptr<test::Process> late = Node("early", "3s", "10ms");
    EXPECT_EQ(late->Wait(), 3) << late->err();
    EXPECT_NE(late->out().find("skipped recently ran"), std::string::npos)
        << late->out();
  }
  ASSERT_LT(absl::Now() - start, absl::Seconds(3))
      << "too slow to be a test (or the first process waited out its keep)";
  EXPECT_EQ(Runs(), 1);
  // And after lock_at_least_for, the job is free to run (no wait for
  // lock_at_most_for, 30s), once the backend shows the keep ended to a
  // process that reads it for the first time.
  absl::SleepFor(start + absl::Milliseconds(3300) + GetParam().keep_seen_late -
                 absl::Now());
  std::unique_ptr<test::Process> next = Node("early", "3s", "10ms");
  EXPECT_EQ(next->Wait(), 0) << next->err();
  EXPECT_EQ(Runs(), 2);
}

INSTANTIATE_TEST_SUITE_P(
    Backends, JobGuardProcessTest, ::testing::ValuesIn(test::ServerBackends()),
    [](const ::testing::TestParamInfo<test::ServerBackend>& info) {
      return info.param.label;
    });

}  // namespace
}  // namespace dlock
