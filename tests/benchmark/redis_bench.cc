// The Redis backend against its ceiling on the same server in the same run:
// redis-benchmark's EVALSHA rate (a script that does nothing, so the rate is
// the round trip itself), halved since a pair costs two round trips.
//
//   dlock_redis_bench [seconds-per-case]      (default 5)
//
// Rates are measured in alternating half-second slices of the ceiling and
// of dlock, and the ratio is the median of the per-round ratios.
//
// Starts its own redis-server. Prints each rate as a ratio of its ceiling
// against the targets of docs/performance.md; exits non-zero only when
// something fails, never for a missed target (the machine is shared).
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench_util.h"
#include "redis_sentinel_group.h"

namespace {

constexpr double kTargetOneThread = 0.85;
constexpr double kTargetSixteenThreads = 0.80;
constexpr double kTargetHandOffRoundTrips = 3.0;
// redis-sentinel:// against redis:// on the same master, with no failover.
constexpr double kTargetSentinelCost = 0.95;

// One round trip as the hand-off meets it: a lone command after the client
// sat idle for as long as a waiter does (2 ms), not one of a back-to-back
// stream. On a VM an idle CPU takes long to wake, which a stream hides.
absl::StatusOr<absl::Duration> IsolatedRoundTrip(int port, int samples) {
  redisContext* ctx = redisConnect("127.0.0.1", port);
  if (ctx == nullptr || ctx->err != 0) {
    if (ctx != nullptr) redisFree(ctx);
    return absl::UnavailableError("cannot connect to measure a round trip");
  }
  std::vector<absl::Duration> times;
  for (int i = 0; i < samples; ++i) {
    absl::SleepFor(absl::Milliseconds(2));
    const absl::Time start = absl::Now();
    void* reply = redisCommand(ctx, "EVAL %s 0", "return 1");
    times.push_back(absl::Now() - start);
    if (reply == nullptr) break;
    freeReplyObject(reply);
  }
  redisFree(ctx);
  if (times.size() != static_cast<size_t>(samples)) {
    return absl::UnavailableError("lost the connection measuring a round trip");
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int seconds = dlock::bench::SecondsPerCase(argc, argv);
  if (seconds < 1) return 2;
  absl::StatusOr<dlock::bench::BenchServer> server =
      dlock::bench::StartServer("redis");
  if (!server.ok()) return dlock::bench::Fail(server.status());
  const int port = server->port;
  const std::string uri = server->Uri("bench");

  // The ceiling: redis-benchmark's rate for a script that does nothing
  // (EVALSHA after its first EVAL), halved since a pair is two round trips.
  const std::vector<std::string> noop = {"EVAL", "\"return 1\"", "0"};
  const absl::Duration slice = absl::Milliseconds(500);
  const int rounds = 2 * seconds;  // each round: one slice of each side
  auto ceiling = [&](int clients, int requests) {
    return [&, clients, requests]() -> absl::StatusOr<double> {
      absl::StatusOr<double> rate =
          dlock::bench::RunRedisBenchmark(port, clients, requests, noop);
      if (!rate.ok()) return rate.status();
      return *rate / 2;
    };
  };
  auto ours = [&](int threads) {
    return [&, threads]() {
      return dlock::bench::UncontendedPairsPerSecond(uri, threads, slice);
    };
  };
  absl::StatusOr<dlock::bench::Paired> one =
      dlock::bench::MeasurePaired(rounds, ceiling(1, 5000), ours(1));
  if (!one.ok()) return dlock::bench::Fail(one.status());
  absl::StatusOr<dlock::bench::Paired> sixteen =
      dlock::bench::MeasurePaired(rounds, ceiling(16, 20000), ours(16));
  if (!sixteen.ok()) return dlock::bench::Fail(sixteen.status());
  absl::StatusOr<dlock::bench::Latency> handoff =
      dlock::bench::HandOffLatency(uri, 500 * seconds);
  if (!handoff.ok()) return dlock::bench::Fail(handoff.status());
  absl::StatusOr<absl::Duration> lone_trip = IsolatedRoundTrip(port, 300);
  if (!lone_trip.ok()) return dlock::bench::Fail(lone_trip.status());

  // Sentinel mode: the same master reached through its Sentinels, paired
  // with redis:// straight to it.
  absl::StatusOr<std::unique_ptr<dlock::testing::RedisSentinelGroup>> group =
      dlock::testing::RedisSentinelGroup::Start();
  if (!group.ok()) return dlock::bench::Fail(group.status());
  absl::StatusOr<int> master = (*group)->CurrentMasterPort();
  if (!master.ok()) return dlock::bench::Fail(master.status());
  const std::string direct =
      absl::StrCat("redis://127.0.0.1:", *master, "?namespace=bench");
  const std::string sentinel =
      absl::StrCat("redis-sentinel://", (*group)->SentinelUri(), "/",
                   (*group)->master_name(), "?namespace=bench");
  auto pairs = [&](const std::string& u, int threads) {
    return [&, u, threads]() {
      return dlock::bench::UncontendedPairsPerSecond(u, threads, slice);
    };
  };
  absl::StatusOr<dlock::bench::Paired> sentinel_one =
      dlock::bench::MeasurePaired(rounds, pairs(direct, 1), pairs(sentinel, 1));
  if (!sentinel_one.ok()) return dlock::bench::Fail(sentinel_one.status());
  absl::StatusOr<dlock::bench::Paired> sentinel_sixteen =
      dlock::bench::MeasurePaired(rounds, pairs(direct, 16),
                                  pairs(sentinel, 16));
  if (!sentinel_sixteen.ok()) {
    return dlock::bench::Fail(sentinel_sixteen.status());
  }

  const double handoff_trips = absl::FDivDuration(handoff->median, *lone_trip);
  std::cout << absl::StrFormat(
      "redis backend, server %s; %d rounds of %s slices, medians\n"
      "ceiling: redis-benchmark EVALSHA of a no-op script, halved\n"
      "                         ceiling      dlock   ratio (spread)\n"
      "  1 thread   pairs/s  %9.0f  %9.0f   %s (%.2f..%.2f)\n"
      "  16 threads pairs/s  %9.0f  %9.0f   %s (%.2f..%.2f)\n"
      "hand-off (release to waiter holding), %d samples:\n"
      "  median %s = %.2f lone round trips of %s (target <= %.1f): %s\n"
      "  p99    %s\n",
      uri, rounds, absl::FormatDuration(slice), one->ceiling, one->ours,
      dlock::bench::Verdict(one->ratio, kTargetOneThread), one->ratio_min,
      one->ratio_max, sixteen->ceiling, sixteen->ours,
      dlock::bench::Verdict(sixteen->ratio, kTargetSixteenThreads),
      sixteen->ratio_min, sixteen->ratio_max, handoff->samples,
      absl::FormatDuration(handoff->median), handoff_trips,
      absl::FormatDuration(*lone_trip), kTargetHandOffRoundTrips,
      handoff_trips <= kTargetHandOffRoundTrips ? "ok" : "MISSED",
      absl::FormatDuration(handoff->p99));
  std::cout << absl::StrFormat(
      "sentinel mode: redis-sentinel:// vs redis:// on the same master (with "
      "a replica), no failover\n"
      "                        redis://  sentinel   ratio (spread)\n"
      "  1 thread   pairs/s  %9.0f  %9.0f   %s (%.2f..%.2f)\n"
      "  16 threads pairs/s  %9.0f  %9.0f   %s (%.2f..%.2f)\n",
      sentinel_one->ceiling, sentinel_one->ours,
      dlock::bench::MetOrMissed(sentinel_one->ratio, kTargetSentinelCost),
      sentinel_one->ratio_min, sentinel_one->ratio_max,
      sentinel_sixteen->ceiling, sentinel_sixteen->ours,
      dlock::bench::MetOrMissed(sentinel_sixteen->ratio, kTargetSentinelCost),
      sentinel_sixteen->ratio_min, sentinel_sixteen->ratio_max);
  return 0;
}
