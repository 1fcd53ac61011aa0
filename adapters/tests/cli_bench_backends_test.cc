// `dlock bench` against every server configuration of the test registry
// (Redis, Redlock, Sentinel, ZooKeeper, PostgreSQL in both modes), with
// short runs: every scenario reports, the server's memory is read where it
// can tell, and nothing is left held in the benchmark's namespace.
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_servers.h"
#include "test_servers_gtest.h"
#include "test_util.h"

namespace dlock {
namespace {

using test::BenchNumber;
using test::BenchRaw;
using test::BenchRecordsOf;
using test::Dlock;
using test::Result;
using test::RunProcess;
using test::TestBackend;
using ::testing::HasSubstr;

class CliBenchBackendTest : public ::testing::TestWithParam<TestBackend> {};

TEST_P(CliBenchBackendTest, EveryScenarioReportsAndNothingIsLeftHeld) {
  const std::string uri = test::UriForTest(GetParam(), "");
  Result r = RunProcess(
      Dlock({"bench", "--backend", uri, "--duration", "200ms", "--warmup",
             "50ms", "--threads", "1,4", "--clients", "3", "--locks", "30",
             "--names", "100", "--lease", "1500ms", "--json", "--quiet"}),
      {}, absl::Seconds(120));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("\"error\"")));

  std::vector<std::string> uncontended = BenchRecordsOf(r.out, "uncontended");
  ASSERT_EQ(uncontended.size(), 2u) << r.out;
  for (const std::string& u : uncontended) {
    EXPECT_GT(BenchNumber(u, "pairs_per_sec"), 0) << u;
    EXPECT_GT(BenchNumber(u, "acquire_us.p50"), 0) << u;
    EXPECT_GT(BenchNumber(u, "release_us.p50"), 0) << u;
  }
  std::vector<std::string> contention = BenchRecordsOf(r.out, "contention");
  ASSERT_EQ(contention.size(), 1u) << r.out;
  EXPECT_GT(BenchNumber(contention[0], "handoffs_per_sec"), 0) << contention[0];
  EXPECT_GT(BenchNumber(contention[0], "handoff_us.p50"), 0) << contention[0];

  std::vector<std::string> watchdog = BenchRecordsOf(r.out, "watchdog");
  ASSERT_EQ(watchdog.size(), 1u) << r.out;
  const std::string& w = watchdog[0];
  // Every hold renewed at least once over a lease, in batches.
  EXPECT_GE(BenchNumber(w, "renewals_per_sec") * BenchNumber(w, "seconds"), 30)
      << w;
  EXPECT_LT(BenchNumber(w, "renew_calls_per_sec") * 5,
            BenchNumber(w, "renewals_per_sec"))
      << w;

  std::vector<std::string> memory = BenchRecordsOf(r.out, "memory");
  ASSERT_EQ(memory.size(), 1u) << r.out;
  // Every server here can tell its memory (INFO, relation size, mntr).
  EXPECT_NE(BenchRaw(memory[0], "server_bytes_per_held_lock"), "null")
      << memory[0];
  EXPECT_GT(BenchNumber(memory[0], "client_bytes_per_held_lock"), 0)
      << memory[0];

  // What it took, it released.
  Result list = RunProcess(Dlock(
      {"list", "--backend", uri, "--namespace", "dlock-bench", "--json"}));
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_EQ(list.out, "[]\n");
}

INSTANTIATE_TEST_SUITE_P(
    Backends, CliBenchBackendTest,
    ::testing::ValuesIn(test::TestBackends({.across_processes = true})),
    [](const ::testing::TestParamInfo<TestBackend>& info) {
      return info.param.label;
    });

}  // namespace
}  // namespace dlock
