// Copyright dlock authors. Measuring loops shared by every backend's
// benchmark: acquire/release throughput and hand-off latency.
#ifndef DLOCK_TESTS_BENCHMARK_BENCH_UTIL_H_
#define DLOCK_TESTS_BENCHMARK_BENCH_UTIL_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "test_servers.h"

namespace dlock::bench {

// Calls `op(thread)` in a loop on `threads` threads for `duration` and
// returns the calls per second, or the first error.
absl::StatusOr<double> LoopRate(int threads, absl::Duration duration,
                                absl::FunctionRef<absl::Status(int)> op);

// What a shell command prints (stdout and stderr).
std::string CommandOutput(const std::string& command);

// The number a peer script printed as "<key> <n>" on a line of its own
// (the last such line); nullopt when there is none.
std::optional<double> PrintedValue(const std::string& output,
                                   const std::string& key);

// The directory of this file, with a trailing slash: where the peers'
// scripts are.
std::string BenchSourceDir();

// Runs a peer's benchmark script next to this file with Debian's python
// (`packages` are installed for it, not for another python on PATH) and
// returns the rate the script prints as "RATE <n>".
absl::StatusOr<double> PeerScriptRate(const std::string& script,
                                      const std::string& args,
                                      const std::string& packages);

// One slice of uncontended acquire-plus-release pairs: their rate, and the
// acquire's latency (zero where the measurement has none, e.g. a ceiling
// run by another tool).
struct PairSample {
  double rate = 0;
  absl::Duration acquire_p50;
  absl::Duration acquire_p99;
};

// Acquire-plus-release pairs: `threads` threads of one client, each on its
// own name, for `duration`, after one untimed pair each.
absl::StatusOr<PairSample> UncontendedPairs(const std::string& uri, int threads,
                                            absl::Duration duration);
// The same, the rate alone.
absl::StatusOr<double> UncontendedPairsPerSecond(const std::string& uri,
                                                 int threads,
                                                 absl::Duration duration);

struct Latency {
  absl::Duration median;
  absl::Duration p99;
  int samples = 0;
};

// Two clients alternate on one name; each sample is the time from the
// holder's Release() call to the waiter's Acquire() returning.
absl::StatusOr<Latency> HandOffLatency(const std::string& uri, int samples);

// The rate redis-benchmark reports (requests per second), run as a child;
// `pipeline` commands in flight per client (its -P).
absl::StatusOr<double> RunRedisBenchmark(
    int port, int clients, int requests,
    const std::vector<std::string>& command, int pipeline = 1);

// A rate and its ceiling measured in alternating short slices, so that load
// that comes and goes on a shared machine hits both alike. Medians over the
// rounds, and the spread of the per-round ratio.
struct Paired {
  double ceiling = 0;
  double ours = 0;
  double ratio = 0;
  double ratio_min = 0;
  double ratio_max = 0;
};
absl::StatusOr<Paired> MeasurePaired(
    int rounds, absl::FunctionRef<absl::StatusOr<double>()> ceiling,
    absl::FunctionRef<absl::StatusOr<double>()> ours);

// Any number of cases measured in alternating slices: each round runs every
// case once, in order. samples[case][round].
struct Rounds {
  std::vector<std::vector<PairSample>> samples;

  // Medians over the rounds of case `c`'s rate and latencies.
  PairSample Median(int c) const;
  // Case `ours` against case `base`: their median rates, the median of the
  // per-round ratios and its spread.
  Paired Ratio(int ours, int base) const;
};
absl::StatusOr<Rounds> MeasureRounds(
    int rounds,
    const std::vector<std::function<absl::StatusOr<PairSample>()>>& cases);

// Runs the process as the dlock CLI does (adapters/cli/main.cc): no check of
// each Mutex lock against the process's lock-order graph, which an Abseil
// built without NDEBUG (Debian's) makes. Every benchmark's main calls it
// first, so that dlock and the ceilings measured with its clients run alike.
void RunAsTheCliDoes();

// The benchmark's only argument, seconds per case (default 5); prints the
// usage and returns 0 when it is not a positive whole number.
int SecondsPerCase(int argc, char** argv);

// The test registry's entry `label` (integration/test_servers.h) with its
// server started, and the server's port; what is missing if it cannot start.
struct BenchServer {
  dlock::test::TestBackend backend;
  int port = 0;
  std::string Uri(const std::string& ns, const std::string& extra = "") const;
};
absl::StatusOr<BenchServer> StartServer(const std::string& label);

// `PROGRAM --ceiling HOSTS THREADS SECONDS` (argv as main() got it): runs
// `measure` once and prints its rate as one JSON record of the ceiling
// `what`, for scripts/bench_report.py; the exit code (2 for bad usage).
int CeilingSlice(int argc, char** argv, const std::string& what,
                 absl::FunctionRef<absl::StatusOr<double>(
                     const std::string& hosts, int threads, absl::Duration)>
                     measure);

// Prints why the benchmark failed; returns the exit code (1).
int Fail(const absl::Status& status);

// "0.91 of ceiling (target 0.85): MET" / "... MISSED".
std::string Verdict(double ratio, double target);

// "1.62 (target >= 1.50): MET" / "... MISSED".
std::string MetOrMissed(double ratio, double target);

}  // namespace dlock::bench

#endif  // DLOCK_TESTS_BENCHMARK_BENCH_UTIL_H_
