// The Redis backend against its ceiling on the same server in the same run:
// redis-benchmark's EVALSHA rate (a script that does nothing, so the rate is
// the round trip itself), halved since a pair costs two round trips.
//
//   dlock_redis_bench [seconds-per-case]      (default 5)
//
// Rates are measured in alternating half-second slices of the ceiling and
// of dlock, and the ratio is the median of the per-round ratios. With 64
// threads dlock is also set against redis-benchmark pipelining 16 commands
// per client (-P 16), the most the server does with no-op scripts. Then
// the client's memory across 100,000 distinct names, and the watchdog's
// cost with 10,000 locks held; Sentinel's cost and TLS's (rediss://), each
// paired with redis://.
//
// Starts its own redis-server. Prints each rate as a ratio of its ceiling
// against the targets of docs/performance.md; exits non-zero only when
// something fails, never for a missed target (the machine is shared).
#include <hiredis/hiredis.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <latch>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "bench_util.h"
#include "dlock/backend/forwarding_backend.h"
#include "dlock/dlock.h"
#include "redis_sentinel_group.h"
#include "redis_server_cost.h"

namespace {

constexpr double kTargetOneThread = 0.85;
constexpr double kTargetSixteenThreads = 0.90;
constexpr double kTargetHandOffRoundTrips = 3.0;
// 100,000 distinct names acquired and released: the client's heap grows by
// at most this much.
constexpr int kMemoryNames = 100000;
constexpr int64_t kTargetMemoryGrowth = 1 << 20;
// 10,000 locks held under the watchdog: at most this many round trips
// (RenewMany calls, each one pipeline) per renewal interval, on at most
// this share of one core.
constexpr int kWatchdogLocks = 10000;
constexpr double kTargetWatchdogTripsPerInterval = 5;
constexpr double kTargetWatchdogCpu = 0.05;
// redis-sentinel:// against redis:// on the same master, with no failover.
constexpr double kTargetSentinelCost = 0.95;
// rediss:// against redis://: each pair's two round trips over TLS keep at
// least this share of the plaintext rate.
constexpr double kTargetTlsCost = 0.75;

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

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return absl::ToDoubleSeconds(absl::DurationFromTimeval(usage.ru_utime) +
                               absl::DurationFromTimeval(usage.ru_stime));
}

int64_t ResidentBytes() {
  long pages = 0, resident = 0;  // NOLINT(runtime/int): statm's format
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  std::fclose(f);
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

struct MemoryUse {
  int64_t heap_before = 0;  // mallinfo2().uordblks: bytes malloc hands out
  int64_t heap_after = 0;
  int64_t rss_before = 0;  // /proc/self/statm, for reference
  int64_t rss_after = 0;
};

// kMemoryNames distinct names, each acquired and released once, by 16
// threads of one client. The threads exist and have each done one pair
// before the first look and still exist at the second, so that only what
// the names leave behind counts.
absl::StatusOr<MemoryUse> MemoryAcrossNames(const std::string& uri) {
  constexpr int kThreads = 16;
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
      dlock::Connect(uri);
  if (!client.ok()) return client.status();
  std::latch warmed(kThreads + 1);
  std::latch finished(kThreads + 1);
  absl::Notification start;
  absl::Notification leave;
  std::atomic<int> failures{0};
  absl::Mutex error_mu;
  absl::Status error;
  auto pair = [&](const std::string& name) {
    absl::StatusOr<std::unique_ptr<dlock::DistributedLock>> lock =
        (*client)->GetLock(name);
    absl::Status s = lock.status();
    if (s.ok()) {
      absl::StatusOr<dlock::Hold> hold =
          (*lock)->Acquire({.lease = absl::Seconds(10)});
      s = hold.ok() ? hold->Release() : hold.status();
    }
    if (!s.ok() && failures.fetch_add(1) == 0) {
      absl::MutexLock l(&error_mu);
      error = s;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      pair(absl::StrCat("bench-memory-warm-", t));
      warmed.count_down();
      start.WaitForNotification();
      for (int i = t; i < kMemoryNames; i += kThreads) {
        pair(absl::StrCat("bench-memory-", i));
      }
      finished.count_down();
      leave.WaitForNotification();
    });
  }
  MemoryUse out;
  warmed.arrive_and_wait();
  out.heap_before = static_cast<int64_t>(mallinfo2().uordblks);
  out.rss_before = ResidentBytes();
  start.Notify();
  finished.arrive_and_wait();
  out.heap_after = static_cast<int64_t>(mallinfo2().uordblks);
  out.rss_after = ResidentBytes();
  leave.Notify();
  for (std::thread& t : threads) t.join();
  absl::MutexLock l(&error_mu);
  if (!error.ok()) return error;
  return out;
}

// Counts what the watchdog sends: each RenewMany is one pipeline, one
// round trip.
class CountingBackend : public dlock::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  std::vector<absl::Status> RenewMany(
      absl::Span<const dlock::RenewCall> calls) override {
    batches_.fetch_add(1);
    renewals_.fetch_add(static_cast<int64_t>(calls.size()));
    return ForwardingBackend::RenewMany(calls);
  }
  std::atomic<int64_t> batches_{0};
  std::atomic<int64_t> renewals_{0};
};

struct WatchdogCost {
  absl::Duration interval;
  double intervals = 0;
  int64_t batches = 0;
  int64_t renewals = 0;
  double cpu_share = 0;  // of one core, the whole process
  int held_after = 0;
};

// kWatchdogLocks locks held with a 3 s watchdog lease (renewed every
// second) for `intervals` renewal intervals, the process otherwise idle.
absl::StatusOr<WatchdogCost> WatchdogCostOf(const std::string& uri,
                                            int intervals) {
  CountingBackend* counter = nullptr;
  dlock::ClientOptions options;
  options.watchdog_lease = absl::Seconds(3);
  options.backend_decorator = [&](std::unique_ptr<dlock::Backend> b) {
    auto c = std::make_unique<CountingBackend>(std::move(b));
    counter = c.get();
    return c;
  };
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
      dlock::Connect(uri, options);
  if (!client.ok()) return client.status();
  std::vector<dlock::Hold> holds(kWatchdogLocks);
  std::vector<std::unique_ptr<dlock::DistributedLock>> locks(kWatchdogLocks);
  constexpr int kThreads = 16;
  absl::Mutex error_mu;
  absl::Status error;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kWatchdogLocks; i += kThreads) {
        absl::StatusOr<std::unique_ptr<dlock::DistributedLock>> lock =
            (*client)->GetLock(absl::StrCat("bench-watchdog-", i));
        absl::StatusOr<dlock::Hold> hold =
            lock.ok() ? (*lock)->Acquire({}) : lock.status();
        if (!hold.ok()) {
          absl::MutexLock l(&error_mu);
          error = hold.status();
          return;
        }
        locks[i] = *std::move(lock);
        holds[i] = *std::move(hold);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (!error.ok()) return error;
  WatchdogCost out;
  out.interval = options.watchdog_lease / 3;
  out.intervals = intervals;
  const int64_t batches = counter->batches_.load();
  const int64_t renewals = counter->renewals_.load();
  const double cpu = CpuSeconds();
  absl::SleepFor(out.interval * intervals);
  out.cpu_share =
      (CpuSeconds() - cpu) / absl::ToDoubleSeconds(out.interval * intervals);
  out.batches = counter->batches_.load() - batches;
  out.renewals = counter->renewals_.load() - renewals;
  for (dlock::Hold& h : holds) {
    out.held_after += h.state() == dlock::LockState::kHeld ? 1 : 0;
  }
  if (absl::Status s = (*client)->Close(); !s.ok()) return s;
  return out;
}

// CPU seconds the redis-server on `port` has used (INFO cpu).
absl::StatusOr<double> ServerCpuSeconds(int port) {
  absl::StatusOr<std::string> info = dlock::test::RedisExchange(
      port,
      absl::StrCat(dlock::test::EncodeRedisCommand({"INFO", "cpu"}),
                   dlock::test::EncodeRedisCommand({"QUIT"})),
      absl::Seconds(5));
  if (!info.ok()) return info.status();
  double total = 0;
  int found = 0;
  for (absl::string_view line : absl::StrSplit(*info, "\r\n")) {
    double seconds = 0;
    if ((absl::ConsumePrefix(&line, "used_cpu_user:") ||
         absl::ConsumePrefix(&line, "used_cpu_sys:")) &&
        absl::SimpleAtod(line, &seconds)) {
      total += seconds;
      ++found;
    }
  }
  if (found != 2) return absl::InternalError("no used_cpu_* in INFO cpu");
  return total;
}

// CPU per acquire + release pair, client and server, on one thread of a
// client set up before: unlike a rate, what a machine's other load does
// not change much.
struct CpuPerPair {
  double client_us = 0;
  double server_us = 0;
};

absl::StatusOr<CpuPerPair> CpuPerPairOf(dlock::DistributedLock& lock, int port,
                                        int pairs) {
  const double client = CpuSeconds();
  absl::StatusOr<double> server = ServerCpuSeconds(port);
  if (!server.ok()) return server.status();
  for (int i = 0; i < pairs; ++i) {
    absl::StatusOr<dlock::Hold> hold =
        lock.Acquire({.lease = absl::Seconds(10)});
    if (!hold.ok()) return hold.status();
    if (absl::Status s = hold->Release(); !s.ok()) return s;
  }
  absl::StatusOr<double> server_after = ServerCpuSeconds(port);
  if (!server_after.ok()) return server_after.status();
  return CpuPerPair{.client_us = (CpuSeconds() - client) * 1e6 / pairs,
                    .server_us = (*server_after - *server) * 1e6 / pairs};
}

// rediss:// to a server that takes only TLS against redis:// to one of the
// same configuration without, in alternating slices: the rates, and the
// CPU each pair costs on either side.
struct TlsCost {
  dlock::bench::Paired one;
  dlock::bench::Paired sixteen;
  CpuPerPair plain_cpu;  // medians over the rounds
  CpuPerPair tls_cpu;
  int rounds = 0;
};

absl::StatusOr<TlsCost> MeasureTlsCost(const std::string& plain_uri,
                                       int plain_port, int rounds,
                                       absl::Duration slice) {
  absl::StatusOr<std::unique_ptr<dlock::test::RedisServer>> server =
      dlock::test::RedisServer::Start({.tls = true});
  if (!server.ok()) return server.status();
  const std::string tls_uri = (*server)->Uri("bench");
  auto pairs = [&](const std::string& u, int threads) {
    return [&, u, threads]() {
      return dlock::bench::UncontendedPairsPerSecond(u, threads, slice);
    };
  };
  TlsCost cost;
  for (auto [threads, out] : {std::pair{1, &cost.one}, {16, &cost.sixteen}}) {
    absl::StatusOr<dlock::bench::Paired> paired = dlock::bench::MeasurePaired(
        rounds, pairs(plain_uri, threads), pairs(tls_uri, threads));
    if (!paired.ok()) return paired.status();
    *out = *paired;
  }
  // CPU: a client of each, connected once; 1,000 pairs a round each.
  struct Side {
    std::string uri;
    int port;
    std::vector<CpuPerPair> samples;
  } sides[] = {{plain_uri, plain_port, {}}, {tls_uri, (*server)->port(), {}}};
  for (int round = 0; round < 2 * rounds; ++round) {
    for (Side& side : sides) {
      absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
          dlock::Connect(side.uri);
      if (!client.ok()) return client.status();
      absl::StatusOr<std::unique_ptr<dlock::DistributedLock>> lock =
          (*client)->GetLock("bench-cpu");
      if (!lock.ok()) return lock.status();
      absl::StatusOr<CpuPerPair> cpu = CpuPerPairOf(**lock, side.port, 1000);
      if (!cpu.ok()) return cpu.status();
      side.samples.push_back(*cpu);
    }
  }
  auto median = [](std::vector<CpuPerPair> samples) {
    auto at = [&](auto field) {
      std::sort(samples.begin(), samples.end(),
                [&](const CpuPerPair& a, const CpuPerPair& b) {
                  return a.*field < b.*field;
                });
      return samples[samples.size() / 2].*field;
    };
    return CpuPerPair{.client_us = at(&CpuPerPair::client_us),
                      .server_us = at(&CpuPerPair::server_us)};
  };
  cost.plain_cpu = median(sides[0].samples);
  cost.tls_cpu = median(sides[1].samples);
  cost.rounds = 2 * rounds;
  return cost;
}

void PrintServerCost(const dlock::bench::ServerCost& cost) {
  auto ratio = [&](double us) { return us / cost.peer; };
  std::cout << absl::StrFormat(
      "server cost per pair (INFO commandstats, 16 threads/clients):\n"
      "  dlock %.1f us; SET NX PX + release script (node redis-semaphore's "
      "commands) %.1f us: %.2fx (target <= 1, the peers themselves in the "
      "comparative report): %s\n",
      cost.dlock, cost.peer, ratio(cost.dlock),
      cost.dlock <= cost.peer ? "MET" : "MISSED");
  // What the target asks of any lock with a number the server makes
  // (docs/performance.md, "The fenced floor, measured").
  std::cout << absl::StrFormat(
      "  floors, number not kept: TIME + SET NX PX in a script %.1f us "
      "(%.2fx), in MULTI/EXEC %.1f us (%.2fx)\n"
      "  number kept: a hold's fields, counter + COPY in MULTI/EXEC, HGET + "
      "DEL "
      "script %.1f us (%.2fx)\n",
      cost.time_script, ratio(cost.time_script), cost.time_transaction,
      ratio(cost.time_transaction), cost.copy_transaction,
      ratio(cost.copy_transaction));
}

void PrintTlsCost(const TlsCost& tls) {
  // The time a thread spends on one pair, at each side's median rate.
  auto extra_us = [](const dlock::bench::Paired& p, int threads) {
    return threads * 1e6 * (1 / p.ours - 1 / p.ceiling);
  };
  std::cout << absl::StrFormat(
      "tls: rediss:// vs redis:// (TLS 1.3; servers of the same "
      "configuration, one taking only TLS)\n"
      "                        redis://   rediss://  ratio (spread)   "
      "per pair\n"
      "  1 thread   pairs/s  %9.0f  %9.0f   %s (%.2f..%.2f)  %+.0f us\n"
      "  16 threads pairs/s  %9.0f  %9.0f   %s (%.2f..%.2f)  %+.0f us\n"
      "  CPU per pair, 1 thread (medians of %d rounds of 1000 pairs): "
      "client %.1f -> %.1f us (%+.1f), server %.1f -> %.1f us (%+.1f)\n",
      tls.one.ceiling, tls.one.ours,
      dlock::bench::MetOrMissed(tls.one.ratio, kTargetTlsCost),
      tls.one.ratio_min, tls.one.ratio_max, extra_us(tls.one, 1),
      tls.sixteen.ceiling, tls.sixteen.ours,
      dlock::bench::MetOrMissed(tls.sixteen.ratio, kTargetTlsCost),
      tls.sixteen.ratio_min, tls.sixteen.ratio_max, extra_us(tls.sixteen, 16),
      tls.rounds, tls.plain_cpu.client_us, tls.tls_cpu.client_us,
      tls.tls_cpu.client_us - tls.plain_cpu.client_us, tls.plain_cpu.server_us,
      tls.tls_cpu.server_us, tls.tls_cpu.server_us - tls.plain_cpu.server_us);
}

}  // namespace

int main(int argc, char** argv) {
  dlock::bench::RunAsTheCliDoes();
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
  auto ceiling = [&](int clients, int requests, int pipeline = 1) {
    return [&, clients, requests, pipeline]() -> absl::StatusOr<double> {
      absl::StatusOr<double> rate = dlock::bench::RunRedisBenchmark(
          port, clients, requests, noop, pipeline);
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
  // 64 threads: against 64 clients, and against 64 clients pipelining 16.
  auto sample = [](auto rate_of) {
    return [rate_of]() -> absl::StatusOr<dlock::bench::PairSample> {
      absl::StatusOr<double> rate = rate_of();
      if (!rate.ok()) return rate.status();
      return dlock::bench::PairSample{.rate = *rate};
    };
  };
  absl::StatusOr<dlock::bench::Rounds> sixty_four = dlock::bench::MeasureRounds(
      rounds, {sample(ceiling(64, 40000)), sample(ceiling(64, 200000, 16)),
               sample(ours(64))});
  if (!sixty_four.ok()) return dlock::bench::Fail(sixty_four.status());
  const dlock::bench::Paired plain64 = sixty_four->Ratio(2, 0);
  const dlock::bench::Paired piped64 = sixty_four->Ratio(2, 1);
  absl::StatusOr<dlock::bench::Latency> handoff =
      dlock::bench::HandOffLatency(uri, 500 * seconds);
  if (!handoff.ok()) return dlock::bench::Fail(handoff.status());
  absl::StatusOr<absl::Duration> lone_trip = IsolatedRoundTrip(port, 300);
  if (!lone_trip.ok()) return dlock::bench::Fail(lone_trip.status());

  // Sentinel mode: the same master reached through its Sentinels, paired
  // with redis:// straight to it.
  absl::StatusOr<std::unique_ptr<dlock::test::RedisSentinelGroup>> group =
      dlock::test::RedisSentinelGroup::Start();
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

  absl::StatusOr<TlsCost> tls = MeasureTlsCost(uri, port, rounds, slice);
  if (!tls.ok()) return dlock::bench::Fail(tls.status());

  absl::StatusOr<dlock::bench::ServerCost> cost =
      dlock::bench::ServerCostOf(port, uri, slice, std::max(1, rounds / 2));
  if (!cost.ok()) return dlock::bench::Fail(cost.status());

  absl::StatusOr<MemoryUse> memory = MemoryAcrossNames(uri);
  if (!memory.ok()) return dlock::bench::Fail(memory.status());
  absl::StatusOr<WatchdogCost> watchdog = WatchdogCostOf(uri, 4);
  if (!watchdog.ok()) return dlock::bench::Fail(watchdog.status());

  const double handoff_trips = absl::FDivDuration(handoff->median, *lone_trip);
  std::cout << absl::StrFormat(
      "redis backend, server %s; %d rounds of %s slices, medians\n"
      "ceiling: redis-benchmark EVALSHA of a no-op script, halved\n"
      "                         ceiling      dlock   ratio (spread)\n"
      "  1 thread   pairs/s  %9.0f  %9.0f   %s (%.2f..%.2f)\n"
      "  16 threads pairs/s  %9.0f  %9.0f   %s (%.2f..%.2f)\n"
      "  64 threads pairs/s  %9.0f  %9.0f   %.2f of the 64-client ceiling "
      "(%.2f..%.2f)\n"
      "  64 threads, -P 16   %9.0f  %9.0f   %.2f of the pipelined ceiling "
      "(%.2f..%.2f)\n"
      "  (64-thread target: 2 times the best peer, in the comparative "
      "report)\n"
      "hand-off (release to waiter holding), %d samples:\n"
      "  median %s = %.2f lone round trips of %s (target <= %.1f): %s\n"
      "  p99    %s\n",
      uri, rounds, absl::FormatDuration(slice), one->ceiling, one->ours,
      dlock::bench::Verdict(one->ratio, kTargetOneThread), one->ratio_min,
      one->ratio_max, sixteen->ceiling, sixteen->ours,
      dlock::bench::Verdict(sixteen->ratio, kTargetSixteenThreads),
      sixteen->ratio_min, sixteen->ratio_max, plain64.ceiling, plain64.ours,
      plain64.ratio, plain64.ratio_min, plain64.ratio_max, piped64.ceiling,
      piped64.ours, piped64.ratio, piped64.ratio_min, piped64.ratio_max,
      handoff->samples, absl::FormatDuration(handoff->median), handoff_trips,
      absl::FormatDuration(*lone_trip), kTargetHandOffRoundTrips,
      handoff_trips <= kTargetHandOffRoundTrips ? "MET" : "MISSED",
      absl::FormatDuration(handoff->p99));
  PrintServerCost(*cost);
  const int64_t growth = memory->heap_after - memory->heap_before;
  constexpr double kMiB = 1 << 20;
  std::cout << absl::StrFormat(
      "memory: %d distinct names acquired and released (16 threads)\n"
      "  heap in use (mallinfo2 uordblks) %.2f MiB -> %.2f MiB: %+.3f MiB "
      "(target <= +1 MiB): %s\n"
      "  resident (/proc/self/statm) %.2f MiB -> %.2f MiB\n",
      kMemoryNames, memory->heap_before / kMiB, memory->heap_after / kMiB,
      growth / kMiB, growth <= kTargetMemoryGrowth ? "MET" : "MISSED",
      memory->rss_before / kMiB, memory->rss_after / kMiB);
  const double trips = watchdog->batches / watchdog->intervals;
  const bool watchdog_met = trips <= kTargetWatchdogTripsPerInterval &&
                            watchdog->cpu_share < kTargetWatchdogCpu &&
                            watchdog->held_after == kWatchdogLocks;
  std::cout << absl::StrFormat(
      "watchdog: %d locks held, watchdog_lease 3s (renewed every %s), %.0f "
      "intervals\n"
      "  %.1f round trips (RenewMany pipelines) per interval, %.0f renewals "
      "per interval (target <= %.0f trips)\n"
      "  client CPU %.1f%% of one core (target < %.0f%%); %d of %d still "
      "held: %s\n",
      kWatchdogLocks, absl::FormatDuration(watchdog->interval),
      watchdog->intervals, trips, watchdog->renewals / watchdog->intervals,
      kTargetWatchdogTripsPerInterval, 100 * watchdog->cpu_share,
      100 * kTargetWatchdogCpu, watchdog->held_after, kWatchdogLocks,
      watchdog_met ? "MET" : "MISSED");
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
  PrintTlsCost(*tls);
  return 0;
}
