// The Redis backend against its ceiling on the same server in the same run:
// redis-benchmark's EVALSHA rate (a script that does nothing, so the rate is
// the round trip itself), halved since a pair costs two round trips.
//
//   dlock_redis_bench [seconds-per-case]      (default 5)
//
// Starts its own redis-server. Prints each rate as a ratio of its ceiling
// against the targets of docs/performance.md; exits non-zero only when
// something fails, never for a missed target (the machine is shared).
#include <cstdlib>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "bench_util.h"
#include "redis_server.h"

namespace {

constexpr double kTargetOneThread = 0.85;
constexpr double kTargetSixteenThreads = 0.80;
constexpr double kTargetHandOffRoundTrips = 3.0;

int Fail(const absl::Status& status) {
  std::cerr << "benchmark failed: " << status << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 5;
  if (argc > 1 && (!absl::SimpleAtoi(argv[1], &seconds) || seconds < 1)) {
    std::cerr << "usage: " << argv[0] << " [seconds-per-case]\n";
    return 2;
  }
  const absl::Duration duration = absl::Seconds(seconds);
  absl::StatusOr<std::unique_ptr<dlock::testing::RedisServer>> server =
      dlock::testing::RedisServer::Start();
  if (!server.ok()) return Fail(server.status());
  const int port = (*server)->port();
  const std::string uri = (*server)->Uri("bench");

  // The ceiling: redis-benchmark loads the script itself with EVAL first.
  const std::vector<std::string> noop = {"EVAL", "\"return 1\"", "0"};
  const int requests_1 = 20000 * seconds;
  const int requests_16 = 60000 * seconds;
  absl::StatusOr<double> ceiling_1 =
      dlock::bench::RunRedisBenchmark(port, 1, requests_1, noop);
  if (!ceiling_1.ok()) return Fail(ceiling_1.status());
  absl::StatusOr<double> ceiling_16 =
      dlock::bench::RunRedisBenchmark(port, 16, requests_16, noop);
  if (!ceiling_16.ok()) return Fail(ceiling_16.status());

  absl::StatusOr<double> ours_1 =
      dlock::bench::UncontendedPairsPerSecond(uri, 1, duration);
  if (!ours_1.ok()) return Fail(ours_1.status());
  absl::StatusOr<double> ours_16 =
      dlock::bench::UncontendedPairsPerSecond(uri, 16, duration);
  if (!ours_16.ok()) return Fail(ours_16.status());
  absl::StatusOr<dlock::bench::Latency> handoff =
      dlock::bench::HandOffLatency(uri, 500 * seconds);
  if (!handoff.ok()) return Fail(handoff.status());

  const double pair_ceiling_1 = *ceiling_1 / 2;
  const double pair_ceiling_16 = *ceiling_16 / 2;
  const absl::Duration round_trip = absl::Seconds(1.0 / *ceiling_1);
  const double handoff_trips = absl::FDivDuration(handoff->median, round_trip);
  std::cout << absl::StrFormat(
      "redis backend, %ds per case, server %s\n"
      "ceiling (redis-benchmark EVAL of a no-op script, halved):\n"
      "  1 client:   %9.0f pairs/s   (round trip %s)\n"
      "  16 clients: %9.0f pairs/s\n"
      "uncontended acquire+release:\n"
      "  1 thread:   %9.0f pairs/s   %s\n"
      "  16 threads: %9.0f pairs/s   %s\n"
      "hand-off (release to waiter holding), %d samples:\n"
      "  median %s = %.2f round trips (target <= %.1f): %s\n"
      "  p99    %s\n",
      seconds, uri, pair_ceiling_1, absl::FormatDuration(round_trip),
      pair_ceiling_16, *ours_1,
      dlock::bench::Verdict(*ours_1 / pair_ceiling_1, kTargetOneThread),
      *ours_16,
      dlock::bench::Verdict(*ours_16 / pair_ceiling_16, kTargetSixteenThreads),
      handoff->samples, absl::FormatDuration(handoff->median), handoff_trips,
      kTargetHandOffRoundTrips,
      handoff_trips <= kTargetHandOffRoundTrips ? "ok" : "MISSED",
      absl::FormatDuration(handoff->p99));
  return 0;
}
