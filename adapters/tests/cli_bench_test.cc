// `dlock bench` on memory:// in one process: every scenario's record and
// its figures' consistency, flag errors, a failing backend among several,
// the benchmark's own namespace. Real servers: cli_bench_backends_test.cc.
#include <fstream>
#include <numeric>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "status_testing.h"
#include "test_util.h"

namespace dlock {
namespace {

using test::BenchNumber;
using test::BenchRaw;
using test::BenchRecordsOf;
using test::Dlock;
using test::ExpectOneLine;
using test::Result;
using test::RunProcess;
using ::testing::HasSubstr;
using ::testing::Not;

// Short runs: these tests check what is reported, not how fast.
std::vector<std::string> Short(std::vector<std::string> more) {
  std::vector<std::string> args = {"bench", "--duration", "150ms", "--warmup",
                                   "20ms",  "--threads",  "1,3",   "--clients",
                                   "3",     "--locks",    "40",    "--names",
                                   "200",   "--lease",    "1s"};
  args.insert(args.end(), more.begin(), more.end());
  return Dlock(args);
}

void ExpectOrderedPercentiles(const std::string& record,
                              const std::string& key) {
  const double p50 = BenchNumber(record, key + ".p50");
  const double p99 = BenchNumber(record, key + ".p99");
  const double p999 = BenchNumber(record, key + ".p999");
  EXPECT_GT(p50, 0) << key << " in " << record;
  EXPECT_LE(p50, p99) << record;
  EXPECT_LE(p99, p999) << record;
}

TEST(CliBenchTest, JsonHasEveryScenarioWithConsistentFigures) {
  Result r = RunProcess(Short({"--backend", "memory://bench-all", "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, "{\"tool\":\"dlock\",\"version\":"))
      << r.out;

  std::vector<std::string> uncontended = BenchRecordsOf(r.out, "uncontended");
  ASSERT_EQ(uncontended.size(), 2u) << r.out;
  EXPECT_EQ(BenchNumber(uncontended[0], "concurrency"), 1);
  EXPECT_EQ(BenchNumber(uncontended[1], "concurrency"), 3);
  for (const std::string& u : uncontended) {
    EXPECT_EQ(BenchRaw(u, "namespace"), "\"dlock-bench\"") << u;
    EXPECT_GT(BenchNumber(u, "pairs_per_sec"), 0) << u;
    EXPECT_GE(BenchNumber(u, "seconds"), 0.15) << u;
    ExpectOrderedPercentiles(u, "acquire_us");
    ExpectOrderedPercentiles(u, "release_us");
  }

  std::vector<std::string> contention = BenchRecordsOf(r.out, "contention");
  ASSERT_EQ(contention.size(), 1u) << r.out;
  const std::string& c = contention[0];
  std::vector<double> shares = test::BenchShares(c);
  ASSERT_EQ(shares.size(), 3u) << c;
  EXPECT_NEAR(std::accumulate(shares.begin(), shares.end(), 0.0), 1.0, 0.01);
  EXPECT_GT(BenchNumber(c, "jain"), 1.0 / 3 - 0.01) << c;
  EXPECT_LE(BenchNumber(c, "jain"), 1.0) << c;
  EXPECT_GT(BenchNumber(c, "acquisitions_per_sec"), 0) << c;
  EXPECT_LE(BenchNumber(c, "handoffs_per_sec"),
            BenchNumber(c, "acquisitions_per_sec"))
      << c;
  EXPECT_GT(BenchNumber(c, "longest_wait_ms"), 0) << c;

  std::vector<std::string> watchdog = BenchRecordsOf(r.out, "watchdog");
  ASSERT_EQ(watchdog.size(), 1u) << r.out;
  const std::string& w = watchdog[0];
  EXPECT_EQ(BenchNumber(w, "lease_ms"), 1000) << w;
  // Renewed at a third of the lease, over at least one lease: every lock
  // at least once, in batches (a call per round, not per lock).
  EXPECT_GE(BenchNumber(w, "renewals_per_sec") * BenchNumber(w, "seconds"), 40)
      << w;
  EXPECT_GT(BenchNumber(w, "renew_calls_per_sec"), 0) << w;
  EXPECT_LT(BenchNumber(w, "renew_calls_per_sec") * 10,
            BenchNumber(w, "renewals_per_sec"))
      << w;

  std::vector<std::string> memory = BenchRecordsOf(r.out, "memory");
  ASSERT_EQ(memory.size(), 1u) << r.out;
  const std::string& m = memory[0];
  EXPECT_GT(BenchNumber(m, "client_bytes_per_held_lock"), 0) << m;
  // memory:// has no server to ask, and says so.
  EXPECT_EQ(BenchRaw(m, "server_bytes_per_held_lock"), "null") << m;
  EXPECT_THAT(m, HasSubstr("does not report its memory"));
  EXPECT_EQ(BenchNumber(m, "names"), 200) << m;
}

TEST(CliBenchTest, TableAndProgressUnlessQuiet) {
  Result r = RunProcess(Short(
      {"--backend", "memory://", "--scenarios", "uncontended,contention"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("memory:// (namespace dlock-bench)"));
  EXPECT_THAT(r.out, HasSubstr("pairs/s"));
  EXPECT_THAT(r.out, HasSubstr("hand-offs/s"));
  EXPECT_THAT(r.err, HasSubstr("dlock bench: [1/3] memory://: uncontended"));
  EXPECT_THAT(r.err, HasSubstr("[3/3] memory://: contention, 3 clients"));
  // Issue 22: "1 thread", the acquisitions as the JSON has them, and what
  // Jain's index is.
  EXPECT_THAT(r.out, HasSubstr("  uncontended     1 thread "));
  EXPECT_THAT(r.out, HasSubstr("  uncontended    3 threads "));
  EXPECT_THAT(r.out, HasSubstr(" acquisitions/s, "));
  EXPECT_THAT(r.out, HasSubstr("\nJain's fairness index of the acquisitions "
                               "per client: 1 when every client got the lock "
                               "as often, 1/N when one client got it every "
                               "time.\n"));
  EXPECT_THAT(r.err, HasSubstr("uncontended, 1 thread (up to 170ms)"));

  Result quiet = RunProcess(Short(
      {"--backend", "memory://", "--scenarios", "uncontended", "--quiet"}));
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
}

// A first look in seconds: small settings, unless a flag says otherwise.
TEST(CliBenchTest, QuickTakesSmallSettingsButTheFlagsGiven) {
  const absl::Time start = absl::Now();
  Result r = RunProcess(Dlock({"bench", "--quick", "--backend", "memory://",
                               "--json", "--quiet", "--locks", "50"}));
  ASSERT_EQ(r.code, 0) << r.err;
  // Generous: a hang, not a speed target.
  EXPECT_LT(absl::Now() - start, absl::Seconds(60));
  std::vector<std::string> uncontended = BenchRecordsOf(r.out, "uncontended");
  ASSERT_EQ(uncontended.size(), 2u) << r.out;
  EXPECT_EQ(BenchNumber(uncontended[0], "concurrency"), 1);
  EXPECT_EQ(BenchNumber(uncontended[1], "concurrency"), 8);
  EXPECT_LT(BenchNumber(uncontended[0], "seconds"), 1.0);
  std::vector<std::string> contention = BenchRecordsOf(r.out, "contention");
  ASSERT_EQ(contention.size(), 1u);
  EXPECT_EQ(BenchNumber(contention[0], "concurrency"), 4);
  std::vector<std::string> watchdog = BenchRecordsOf(r.out, "watchdog");
  ASSERT_EQ(watchdog.size(), 1u);
  EXPECT_EQ(BenchNumber(watchdog[0], "locks"), 50);  // given: kept
  EXPECT_EQ(BenchNumber(watchdog[0], "lease_ms"), 1000);
  std::vector<std::string> memory = BenchRecordsOf(r.out, "memory");
  ASSERT_EQ(memory.size(), 1u);
  EXPECT_EQ(BenchNumber(memory[0], "names_asked"), 500);
  EXPECT_GE(BenchNumber(memory[0], "client_bytes_retained_after_names"), 0);
}

TEST(CliBenchTest, BadFlagsExit64WithOneLineSayingWhatToGive) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--scenarios", "uncontended,fast"}, "unknown scenario 'fast'"},
      {{"--threads", "1,0"}, "--threads takes whole numbers from 1 to 1024"},
      {{"--threads", "x"}, "--threads takes whole numbers"},
      {{"--clients", "1"}, "--clients must be from 2 to 256"},
      {{"--locks", "0"}, "--locks must be from 1"},
      {{"--duration", "0"}, "--duration"},
      {{"--duration", "2h"},
       "--duration: '2h' is out of range: give a duration from 1ms to 1h"},
      {{"--lease", "soon"}, "--lease"},
      {{"--backend", "nosuch://x"}, "nosuch"}};
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> args = {"bench", "--backend", "memory://"};
    args.insert(args.end(), flags.begin(), flags.end());
    Result r = RunProcess(Dlock(args));
    EXPECT_EQ(r.code, 64) << flags[1] << ": " << r.err;
    ExpectOneLine(r);
    EXPECT_THAT(r.err, HasSubstr(message)) << flags[1];
    EXPECT_EQ(r.out, "") << flags[1];
  }
}

TEST(CliBenchTest, AFailingBackendIsReportedAndTheNextStillRuns) {
  Result r = RunProcess(
      Short({"--backend", "redis://127.0.0.1:1", "--backend", "memory://",
             "--scenarios", "uncontended", "--json", "--quiet"}));
  EXPECT_EQ(r.code, 69) << r.err;  // unreachable, as other commands say it
  EXPECT_THAT(r.err, HasSubstr("127.0.0.1:1"));
  EXPECT_THAT(
      r.out, HasSubstr("\"uri\":\"redis://127.0.0.1:1\","
                       "\"namespace\":\"dlock-bench\",\"code\":\"UNAVAILABLE\","
                       "\"error\":"));
  std::vector<std::string> measured = BenchRecordsOf(r.out, "uncontended");
  ASSERT_EQ(measured.size(), 2u) << r.out;
  EXPECT_THAT(measured[0], HasSubstr("\"uri\":\"memory://\""));
}

TEST(CliBenchTest, NeverRunsInAProfilesNamespaceButKeepsOneTheUriNames) {
  absl::StatusOr<std::string> dir = test::MakeTempDir("dlock-bench");
  ASSERT_OK(dir);
  const std::string config = *dir + "/dlock.toml";
  std::ofstream(config) << "[profiles.prod]\nbackend = \"memory://\"\n"
                           "namespace = \"payments\"\n"
                           "[profiles.billing]\n"
                           "backend = \"memory://?namespace=billing\"\n";
  Result r =
      RunProcess(Short({"--config", config, "--profile", "prod", "--backend",
                        "memory://?namespace=mine", "--scenarios",
                        "uncontended", "--json", "--quiet"}));
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> records = BenchRecordsOf(r.out, "uncontended");
  ASSERT_EQ(records.size(), 4u) << r.out;  // 1 and 3 threads each
  // --backend first, then --profile.
  EXPECT_EQ(BenchRaw(records[0], "namespace"), "\"(the URI's)\"");
  EXPECT_EQ(BenchRaw(records[2], "namespace"), "\"dlock-bench\"");
  EXPECT_THAT(r.out, Not(HasSubstr("payments")));

  // A namespace inside a profile's URI is a service's too.
  Result billing =
      RunProcess(Short({"--config", config, "--profile", "billing",
                        "--scenarios", "uncontended", "--json", "--quiet"}));
  ASSERT_EQ(billing.code, 0) << billing.err;
  EXPECT_THAT(billing.out, HasSubstr("\"namespace\":\"dlock-bench\""));
  EXPECT_THAT(billing.out, Not(HasSubstr("billing")));

  // Two namespaces for one --backend: which one was meant is unclear.
  Result both =
      RunProcess(Dlock({"bench", "--backend", "memory://?namespace=mine",
                        "--namespace", "other"}));
  EXPECT_EQ(both.code, 64) << both.err;
  ExpectOneLine(both);
  EXPECT_THAT(both.err, HasSubstr("give one of them"));
  test::RemoveTree(*dir);
}

TEST(CliBenchTest, APasswordIsNeverShown) {
  Result r = RunProcess(Short({"--backend", "redis://:s3cret@127.0.0.1:1",
                               "--scenarios", "uncontended,memory", "--json"}));
  EXPECT_EQ(r.code, 69) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"error\":"));
  EXPECT_THAT(r.out, Not(HasSubstr("s3cret")));
  EXPECT_THAT(r.err, Not(HasSubstr("s3cret")));
}

}  // namespace
}  // namespace dlock
