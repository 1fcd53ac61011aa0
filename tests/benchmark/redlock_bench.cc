// redlock:// against node's redlock package and against redis:// on the
// same masters, in the same run: five throwaway masters; redlock:// over the
// first 3 and over all 5, node's `redlock` (v5, ioredis) over the same sets,
// and redis:// on the first master. Each set of masters also has a ceiling:
// plain hiredis sending a script that does nothing to every master at once,
// which shows what the machine allows a fan-out (docs/performance.md).
//
//   dlock_redlock_bench [seconds-per-case]      (default 5)
//
// Each case is uncontended acquire-plus-release pairs (10 s lease, each
// thread on its own name) with 1 and with 16 threads; node runs 1 and 16
// concurrent async loops in one process, which is how node runs concurrent
// work. The cases run in alternating half-second slices (the smoke run, 1 s:
// one round of quarter-second slices), and each rate and acquire latency is
// the median over the rounds; ratios are the median of the per-round
// ratios, with their spread.
//
// The node peer is installed into the build tree by
// `scripts/install-deps.sh BUILD_DIR` (scripts/test.sh does it); without it
// the benchmark fails and says so. Exits non-zero only when something fails,
// never for a missed target (the machine is shared).
#include <hiredis/hiredis.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench_util.h"
#include "redis_server.h"

namespace {

// dlock's Redlock against the npm package on the same masters, same
// concurrency; and against redis:// on one of them (a Redlock round trip
// waits for the slowest of three masters, not one).
constexpr double kTargetOverNode = 1.5;
constexpr double kTargetOverOneMaster = 0.8;

constexpr char kNodePeerDir[] = DLOCK_NODE_PEER_DIR;
constexpr char kBuildDir[] = DLOCK_BUILD_DIR;

absl::Status CheckNodePeer() {
  if (dlock::bench::CommandOutput("command -v node").empty()) {
    return absl::FailedPreconditionError(
        "node is not on PATH: run scripts/install-deps.sh (apt packages "
        "nodejs and npm)");
  }
  const std::string modules = absl::StrCat(kNodePeerDir, "/node_modules/");
  if (!std::filesystem::exists(modules + "redlock") ||
      !std::filesystem::exists(modules + "ioredis")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the node peer (redlock, ioredis) is not installed in ", kNodePeerDir,
        ": run scripts/install-deps.sh ", kBuildDir,
        " (it runs npm ci there; scripts/test.sh does it for its build)"));
  }
  return absl::OkStatus();
}

// One slice of node's redlock on `hosts` with `loops` concurrent loops.
absl::StatusOr<dlock::bench::PairSample> NodeRedlockPairs(
    const std::string& hosts, int loops, absl::Duration slice) {
  const std::string output = dlock::bench::CommandOutput(
      absl::StrCat("node ", dlock::bench::BenchSourceDir(),
                   "peers/node_peer/node_redlock_bench.js ", kNodePeerDir, " ",
                   hosts, " ", loops, " ", absl::ToDoubleSeconds(slice)));
  const std::optional<double> rate = dlock::bench::PrintedValue(output, "RATE");
  const std::optional<double> p50 =
      dlock::bench::PrintedValue(output, "ACQUIRE_P50_US");
  const std::optional<double> p99 =
      dlock::bench::PrintedValue(output, "ACQUIRE_P99_US");
  if (!rate.has_value() || *rate <= 0 || !p50.has_value() || !p99.has_value()) {
    return absl::InternalError(
        absl::StrCat("node_redlock_bench.js printed no rate: ", output));
  }
  return dlock::bench::PairSample{.rate = *rate,
                                  .acquire_p50 = absl::Microseconds(*p50),
                                  .acquire_p99 = absl::Microseconds(*p99)};
}

// The ceiling of a round over `ports`: each thread on connections of its
// own sends a script that does nothing (EVAL "return 1") to every master at
// once and reads every reply, as a plain blocking hiredis client would. A
// pair is two rounds; the "acquire" latency is one round.
absl::StatusOr<dlock::bench::PairSample> FanOutCeiling(
    const std::vector<int>& ports, int threads, absl::Duration slice) {
  std::vector<std::vector<redisContext*>> contexts(threads);
  std::vector<std::vector<absl::Duration>> rounds(threads);
  absl::Status error;
  for (auto& mine : contexts) {
    for (int port : ports) {
      redisContext* ctx = redisConnect("127.0.0.1", port);
      if (ctx == nullptr || ctx->err != 0) {
        error = absl::UnavailableError(
            absl::StrCat("ceiling: cannot connect to 127.0.0.1:", port));
      }
      if (ctx != nullptr) mine.push_back(ctx);
    }
  }
  absl::StatusOr<double> rate;
  if (error.ok()) {
    rate = dlock::bench::LoopRate(threads, slice, [&](int t) {
      const absl::Time start = absl::Now();
      for (redisContext* ctx : contexts[t]) {
        redisAppendCommand(ctx, "EVAL %s 0", "return 1");
      }
      for (redisContext* ctx : contexts[t]) {
        void* reply = nullptr;
        if (redisGetReply(ctx, &reply) != REDIS_OK || reply == nullptr) {
          return absl::UnavailableError("ceiling: lost a connection");
        }
        freeReplyObject(reply);
      }
      rounds[t].push_back(absl::Now() - start);
      return absl::OkStatus();
    });
  }
  for (auto& mine : contexts) {
    for (redisContext* ctx : mine) redisFree(ctx);
  }
  if (!error.ok()) return error;
  if (!rate.ok()) return rate.status();
  std::vector<absl::Duration> all;
  for (const auto& r : rounds) all.insert(all.end(), r.begin(), r.end());
  std::sort(all.begin(), all.end());
  return dlock::bench::PairSample{.rate = *rate / 2,
                                  .acquire_p50 = all[all.size() / 2],
                                  .acquire_p99 = all[all.size() * 99 / 100]};
}

std::string Micros(absl::Duration d) {
  return absl::StrFormat("%.0f us", absl::ToDoubleMicroseconds(d));
}

}  // namespace

int main(int argc, char** argv) {
  dlock::bench::RunAsTheCliDoes();
  const int seconds = dlock::bench::SecondsPerCase(argc, argv);
  if (seconds < 1) return 2;
  if (absl::Status s = CheckNodePeer(); !s.ok()) {
    return dlock::bench::Fail(s);
  }
  absl::StatusOr<std::unique_ptr<dlock::test::RedisGroup>> group =
      dlock::test::RedisGroup::Start(5);
  if (!group.ok()) return dlock::bench::Fail(group.status());
  std::vector<std::string> all_hosts;
  std::vector<int> ports;
  for (int i = 0; i < (*group)->size(); ++i) {
    ports.push_back((*group)->server(i).port());
    all_hosts.push_back(absl::StrCat("127.0.0.1:", ports.back()));
  }
  const std::string hosts3 =
      absl::StrJoin(all_hosts.begin(), all_hosts.begin() + 3, ",");
  const std::string hosts5 = absl::StrJoin(all_hosts, ",");

  // One of: dlock on `uri`, node's redlock on `hosts`, or the no-op
  // fan-out ceiling on the first `ceiling_masters` masters.
  struct Case {
    std::string label;
    std::string uri;
    std::string hosts;
    int ceiling_masters = 0;
  };
  const std::vector<Case> cases = {
      {"ceiling, 1 master", "", "", 1},
      {"ceiling, 3 masters", "", "", 3},
      {"ceiling, 5 masters", "", "", 5},
      {"redis:// (master 1)", (*group)->server(0).Uri("bench"), ""},
      {"redlock:// 3 masters",
       absl::StrCat("redlock://", hosts3, "?namespace=bench"), ""},
      {"redlock:// 5 masters",
       absl::StrCat("redlock://", hosts5, "?namespace=bench"), ""},
      {"node redlock 3 masters", "", hosts3},
      {"node redlock 5 masters", "", hosts5},
  };
  enum {
    kCeiling1,
    kCeiling3,
    kCeiling5,
    kRedis,
    kRedlock3,
    kRedlock5,
    kNode3,
    kNode5
  };

  // The smoke run (1 s) takes one round of shorter slices, to stay short:
  // node starts a process per slice.
  const bool smoke = seconds == 1;
  const absl::Duration slice = absl::Milliseconds(smoke ? 250 : 500);
  const int rounds = smoke ? 1 : 2 * seconds;
  std::cout << absl::StrFormat(
      "redlock bench: masters %s; %d round(s) of %s slices, medians\n"
      "%-26s %10s %12s %12s\n",
      hosts5, rounds, absl::FormatDuration(slice), "uncontended pairs",
      "pairs/s", "acquire p50", "acquire p99");
  std::vector<std::string> verdicts;
  for (const int threads : {1, 16}) {
    std::vector<std::function<absl::StatusOr<dlock::bench::PairSample>()>>
        measure;
    for (const Case& c : cases) {
      if (c.ceiling_masters > 0) {
        const std::vector<int> some(ports.begin(),
                                    ports.begin() + c.ceiling_masters);
        measure.push_back([some, threads, slice] {
          return FanOutCeiling(some, threads, slice);
        });
      } else if (!c.uri.empty()) {
        measure.push_back([&c, threads, slice] {
          return dlock::bench::UncontendedPairs(c.uri, threads, slice);
        });
      } else {
        measure.push_back([&c, threads, slice] {
          return NodeRedlockPairs(c.hosts, threads, slice);
        });
      }
    }
    absl::StatusOr<dlock::bench::Rounds> measured =
        dlock::bench::MeasureRounds(rounds, measure);
    if (!measured.ok()) return dlock::bench::Fail(measured.status());
    std::cout << absl::StrFormat("%d thread(s) / node loop(s):\n", threads);
    for (size_t i = 0; i < cases.size(); ++i) {
      const dlock::bench::PairSample m = measured->Median(i);
      std::cout << absl::StrFormat("  %-24s %10.0f %12s %12s\n", cases[i].label,
                                   m.rate, Micros(m.acquire_p50),
                                   Micros(m.acquire_p99));
    }
    auto ratio_line = [&](int ours, int base, double target) {
      const dlock::bench::Paired r = measured->Ratio(ours, base);
      const std::string verdict =
          target > 0 ? dlock::bench::MetOrMissed(r.ratio, target)
                     : absl::StrFormat("%.2f (no target)", r.ratio);
      return absl::StrFormat("  %2d threads: %s / %s = %s (%.2f..%.2f)\n",
                             threads, cases[ours].label, cases[base].label,
                             verdict, r.ratio_min, r.ratio_max);
    };
    verdicts.push_back(ratio_line(kRedlock3, kNode3, kTargetOverNode));
    verdicts.push_back(ratio_line(kRedlock3, kRedis, kTargetOverOneMaster));
    verdicts.push_back(ratio_line(kRedlock5, kNode5, 0));
    verdicts.push_back(ratio_line(kCeiling3, kCeiling1, 0));
    verdicts.push_back(ratio_line(kRedlock3, kCeiling3, 0));
    verdicts.push_back(ratio_line(kRedis, kCeiling1, 0));
  }
  std::cout << "ratios (median of the per-round ratios, spread):\n"
            << absl::StrJoin(verdicts, "");
  return 0;
}
