// `dlock bench` against every server configuration of the test registry
// (Redis, Redlock, Sentinel, ZooKeeper, PostgreSQL in both modes), with
// short runs: every scenario reports, the server's memory is read where it
// can tell, and nothing is left held in the benchmark's namespace.
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench_json.h"
#include "dlock/dlock.h"
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

// The primitives' scenarios, short: each is measured where the backend's
// traits offer it, and named as not offered (with the traits' note, the run
// not failed) where they do not.
TEST_P(CliBenchBackendTest, ThePrimitivesAreMeasuredWhereTheTraitsOfferThem) {
  const std::string uri = test::UriForTest(GetParam(), "");
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
  ASSERT_TRUE(client.ok()) << client.status();
  const BackendTraits traits = (*client)->traits();
  ASSERT_TRUE((*client)->Close().ok());
  Result r = RunProcess(Dlock({"bench",
                               "--backend",
                               uri,
                               "--scenarios",
                               "semaphore,shared,exclusive,election",
                               "--threads",
                               "2",
                               "--permits",
                               "1",
                               "--duration",
                               "100ms",
                               "--warmup",
                               "20ms",
                               "--handovers",
                               "2",
                               "--lapses",
                               "1",
                               "--lease",
                               "300ms",
                               "--json",
                               "--quiet"}),
                        {}, absl::Seconds(120));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("\"error\"")));

  for (auto [scenario, offered] :
       {std::pair{"semaphore", traits.semaphores},
        std::pair{"shared", traits.read_write_locks},
        std::pair{"exclusive", traits.read_write_locks}}) {
    std::vector<std::string> records = BenchRecordsOf(r.out, scenario);
    ASSERT_EQ(records.size(), 1u) << scenario << r.out;
    if (!offered) {
      EXPECT_EQ(BenchRaw(records[0], "offered"), "false") << records[0];
      continue;
    }
    EXPECT_GT(BenchNumber(records[0], "pairs_per_sec"), 0) << records[0];
    EXPECT_GT(BenchNumber(records[0], "acquire_us.p50"), 0) << records[0];
  }
  std::vector<std::string> election = BenchRecordsOf(r.out, "election");
  ASSERT_EQ(election.size(), 1u) << r.out;
  if (traits.elections) {
    EXPECT_GT(BenchNumber(election[0], "resign_handover_us.p50"), 0)
        << election[0];
    EXPECT_GT(BenchNumber(election[0], "lapse_handover_us.p50"), 0)
        << election[0];
  } else {
    EXPECT_EQ(BenchRaw(election[0], "offered"), "false") << election[0];
  }

  // What it took, it released: no lock, semaphore or leader is left.
  if (!traits.can_list) return;
  for (auto [kind, offered] :
       {std::pair{"lock", true}, std::pair{"semaphore", traits.semaphores},
        std::pair{"election", traits.elections}}) {
    if (!offered) continue;
    Result list = RunProcess(Dlock({"list", "--backend", uri, "--namespace",
                                    "dlock-bench", "--kind", kind, "--json"}));
    ASSERT_EQ(list.code, 0) << kind << list.err;
    EXPECT_EQ(list.out, "[]\n") << kind;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Backends, CliBenchBackendTest,
    ::testing::ValuesIn(test::TestBackends({.across_processes = true})),
    [](const ::testing::TestParamInfo<TestBackend>& info) {
      return info.param.label;
    });

}  // namespace
}  // namespace dlock
