#include "bench_util.h"

#include <stdio.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "dlock/dlock.h"

namespace dlock::bench {

absl::StatusOr<double> LoopRate(int threads, absl::Duration duration,
                                absl::FunctionRef<absl::Status(int)> op) {
  std::atomic<int64_t> calls{0};
  std::atomic<bool> stop{false};
  absl::Mutex error_mu;
  absl::Status first_error;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      int64_t done = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        if (absl::Status s = op(t); !s.ok()) {
          absl::MutexLock lock(&error_mu);
          if (first_error.ok()) first_error = s;
          break;
        }
        ++done;
      }
      calls += done;
    });
  }
  const absl::Time start = absl::Now();
  absl::SleepFor(duration);
  stop = true;
  for (std::thread& w : workers) w.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!first_error.ok()) return first_error;
  return static_cast<double>(calls.load()) / seconds;
}

std::string CommandOutput(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return output;
  char buf[512];
  while (fgets(buf, sizeof(buf), pipe) != nullptr) output += buf;
  pclose(pipe);
  return output;
}

std::optional<double> PrintedValue(const std::string& output,
                                   const std::string& key) {
  const std::string prefix = key + " ";
  std::optional<double> value;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    double v = 0;
    if (absl::ConsumePrefix(&line, prefix) && absl::SimpleAtod(line, &v)) {
      value = v;
    }
  }
  return value;
}

std::string BenchSourceDir() {
  std::string dir = __FILE__;
  return dir.substr(0, dir.rfind('/') + 1);
}

absl::StatusOr<double> PeerScriptRate(const std::string& script,
                                      const std::string& args,
                                      const std::string& packages) {
  const std::string output = CommandOutput(
      absl::StrCat("/usr/bin/python3 ", BenchSourceDir(), script, " ", args));
  const std::optional<double> rate = PrintedValue(output, "RATE");
  if (!rate.has_value() || *rate <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(script, " printed no rate (apt-get install -y ", packages,
                     "): ", output));
  }
  return *rate;
}

absl::StatusOr<PairSample> UncontendedPairs(const std::string& uri, int threads,
                                            absl::Duration duration) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
  if (!client.ok()) return client.status();
  std::vector<std::unique_ptr<DistributedLock>> locks;
  for (int t = 0; t < threads; ++t) {
    absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
        (*client)->GetLock(absl::StrCat("bench-uncontended-", t));
    if (!lock.ok()) return lock.status();
    // Untimed: the first call on a fresh client sets up what later ones
    // reuse (scripts, connections), as a peer's warm-up does.
    absl::StatusOr<Hold> hold = (*lock)->Acquire({.lease = absl::Seconds(10)});
    if (!hold.ok()) return hold.status();
    if (absl::Status s = hold->Release(); !s.ok()) return s;
    locks.push_back(*std::move(lock));
  }
  std::vector<std::vector<absl::Duration>> latencies(threads);
  for (auto& l : latencies) l.reserve(1 << 16);
  absl::StatusOr<double> rate = LoopRate(threads, duration, [&](int t) {
    const absl::Time start = absl::Now();
    absl::StatusOr<Hold> hold = locks[t]->Acquire({.lease = absl::Seconds(10)});
    latencies[t].push_back(absl::Now() - start);
    return hold.ok() ? hold->Release() : hold.status();
  });
  if (!rate.ok()) return rate.status();
  std::vector<absl::Duration> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  if (all.empty()) return absl::InternalError("no pair finished in the slice");
  std::sort(all.begin(), all.end());
  return PairSample{.rate = *rate,
                    .acquire_p50 = all[all.size() / 2],
                    .acquire_p99 = all[all.size() * 99 / 100]};
}

absl::StatusOr<double> UncontendedPairsPerSecond(const std::string& uri,
                                                 int threads,
                                                 absl::Duration duration) {
  absl::StatusOr<PairSample> sample = UncontendedPairs(uri, threads, duration);
  if (!sample.ok()) return sample.status();
  return sample->rate;
}

absl::StatusOr<Latency> HandOffLatency(const std::string& uri, int samples) {
  absl::StatusOr<std::unique_ptr<LockClient>> a = Connect(uri);
  if (!a.ok()) return a.status();
  absl::StatusOr<std::unique_ptr<LockClient>> b = Connect(uri);
  if (!b.ok()) return b.status();
  const std::string name = "bench-handoff";
  absl::StatusOr<std::unique_ptr<DistributedLock>> locks[2] = {
      (*a)->GetLock(name), (*b)->GetLock(name)};
  for (auto& l : locks) {
    if (!l.ok()) return l.status();
  }
  // Each side in turn: holds, lets the other start waiting, stamps the time
  // and releases; the other stamps when its Acquire returns. A side
  // acquires on one thread and releases on another: its Hold moves.
  const std::string owners[2] = {"bench-side-a", "bench-side-b"};
  std::atomic<int64_t> released_at_ns{0};
  std::vector<absl::Duration> latencies;
  latencies.reserve(samples);
  absl::Status error;
  absl::StatusOr<Hold> held = (*locks[0])->Acquire(
      {.lease = absl::Seconds(10), .owner_token = owners[0]});
  if (!held.ok()) return held.status();
  Hold holder = *std::move(held);
  for (int i = 0; i < samples && error.ok(); ++i) {
    DistributedLock& waiter = **locks[(i + 1) % 2];
    const std::string& waiter_owner = owners[(i + 1) % 2];
    absl::Notification waiting;
    Hold next;
    std::thread t([&] {
      waiting.Notify();
      absl::StatusOr<Hold> got = waiter.Acquire({.wait = absl::Seconds(10),
                                                 .lease = absl::Seconds(10),
                                                 .owner_token = waiter_owner});
      const int64_t now = absl::GetCurrentTimeNanos();
      if (!got.ok()) {
        error = got.status();
        return;
      }
      latencies.push_back(absl::Nanoseconds(now - released_at_ns.load()));
      next = *std::move(got);
    });
    waiting.WaitForNotification();
    // Let the waiter make its first attempt and go to sleep on the wake-up.
    absl::SleepFor(absl::Milliseconds(2));
    released_at_ns = absl::GetCurrentTimeNanos();
    if (absl::Status s = holder.Release(); !s.ok()) error = s;
    t.join();
    holder = std::move(next);
  }
  if (!error.ok()) return error;
  holder.Release().IgnoreError();
  std::sort(latencies.begin(), latencies.end());
  Latency out;
  out.samples = static_cast<int>(latencies.size());
  out.median = latencies[latencies.size() / 2];
  out.p99 =
      latencies[std::min(latencies.size() - 1, latencies.size() * 99 / 100)];
  return out;
}

absl::StatusOr<double> RunRedisBenchmark(
    int port, int clients, int requests,
    const std::vector<std::string>& command, int pipeline) {
  const std::string output = CommandOutput(absl::StrCat(
      "redis-benchmark -h 127.0.0.1 -p ", port, " -c ", clients, " -n ",
      requests, " -P ", pipeline, " -q ", absl::StrJoin(command, " ")));
  // -q prints "<command>: <rate> requests per second", possibly after
  // progress lines separated by carriage returns.
  for (absl::string_view line :
       absl::StrSplit(output, absl::ByAnyChar("\r\n"))) {
    size_t colon = line.rfind(": ");
    if (colon == absl::string_view::npos ||
        !absl::StrContains(line, "requests per second")) {
      continue;
    }
    absl::string_view rest = line.substr(colon + 2);
    double rate = 0;
    if (absl::SimpleAtod(rest.substr(0, rest.find(' ')), &rate)) return rate;
  }
  return absl::InternalError(
      absl::StrCat("redis-benchmark printed no rate: ", output));
}

namespace {

template <typename T>
T MedianOf(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

absl::StatusOr<Rounds> MeasureRounds(
    int rounds,
    const std::vector<std::function<absl::StatusOr<PairSample>()>>& cases) {
  Rounds out;
  out.samples.resize(cases.size());
  for (int i = 0; i < rounds; ++i) {
    for (size_t c = 0; c < cases.size(); ++c) {
      absl::StatusOr<PairSample> sample = cases[c]();
      if (!sample.ok()) return sample.status();
      out.samples[c].push_back(*sample);
    }
  }
  return out;
}

PairSample Rounds::Median(int c) const {
  std::vector<double> rates;
  std::vector<absl::Duration> p50s, p99s;
  for (const PairSample& s : samples[c]) {
    rates.push_back(s.rate);
    p50s.push_back(s.acquire_p50);
    p99s.push_back(s.acquire_p99);
  }
  return PairSample{.rate = MedianOf(rates),
                    .acquire_p50 = MedianOf(p50s),
                    .acquire_p99 = MedianOf(p99s)};
}

Paired Rounds::Ratio(int ours, int base) const {
  std::vector<double> ratios;
  for (size_t i = 0; i < samples[ours].size(); ++i) {
    ratios.push_back(samples[ours][i].rate / samples[base][i].rate);
  }
  Paired out;
  out.ceiling = Median(base).rate;
  out.ours = Median(ours).rate;
  out.ratio = MedianOf(ratios);
  out.ratio_min = *std::min_element(ratios.begin(), ratios.end());
  out.ratio_max = *std::max_element(ratios.begin(), ratios.end());
  return out;
}

absl::StatusOr<Paired> MeasurePaired(
    int rounds, absl::FunctionRef<absl::StatusOr<double>()> ceiling,
    absl::FunctionRef<absl::StatusOr<double>()> ours) {
  auto rate_only = [](absl::FunctionRef<absl::StatusOr<double>()> measure) {
    return [measure]() -> absl::StatusOr<PairSample> {
      absl::StatusOr<double> rate = measure();
      if (!rate.ok()) return rate.status();
      return PairSample{.rate = *rate};
    };
  };
  absl::StatusOr<Rounds> measured =
      MeasureRounds(rounds, {rate_only(ceiling), rate_only(ours)});
  if (!measured.ok()) return measured.status();
  return measured->Ratio(/*ours=*/1, /*base=*/0);
}

void RunAsTheCliDoes() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

int SecondsPerCase(int argc, char** argv) {
  int seconds = 5;
  if (argc > 1 && (!absl::SimpleAtoi(argv[1], &seconds) || seconds < 1)) {
    std::cerr << "usage: " << argv[0] << " [seconds-per-case]\n";
    return 0;
  }
  return seconds;
}

std::string BenchServer::Uri(const std::string& ns,
                             const std::string& extra) const {
  // The server runs: the URI cannot fail any more.
  return *backend.uri({.ns = ns, .extra = extra});
}

absl::StatusOr<BenchServer> StartServer(const std::string& label) {
  absl::StatusOr<dlock::test::TestBackend> backend =
      dlock::test::FindTestBackend(label);
  if (!backend.ok()) return backend.status();
  if (!backend->port) {
    return absl::InvalidArgumentError(absl::StrCat(label, " has no server"));
  }
  absl::StatusOr<int> port = backend->port();
  if (!port.ok()) return port.status();
  return BenchServer{*std::move(backend), *port};
}

int CeilingSlice(int argc, char** argv, const std::string& what,
                 absl::FunctionRef<absl::StatusOr<double>(
                     const std::string& hosts, int threads, absl::Duration)>
                     measure) {
  int threads = 0;
  double seconds = 0;
  if (argc != 5 || !absl::SimpleAtoi(argv[3], &threads) || threads < 1 ||
      !absl::SimpleAtod(argv[4], &seconds) || seconds <= 0) {
    std::cerr << "usage: " << argv[0] << " --ceiling HOSTS THREADS SECONDS\n";
    return 2;
  }
  absl::StatusOr<double> rate =
      measure(argv[2], threads, absl::Seconds(seconds));
  if (!rate.ok()) return Fail(rate.status());
  std::cout << absl::StrFormat(
      "{\"ceiling\": \"%s\", \"scenario\": \"uncontended\", "
      "\"concurrency\": %d, \"seconds\": %g, \"pairs_per_sec\": %.1f}\n",
      what, threads, seconds, *rate);
  return 0;
}

int Fail(const absl::Status& status) {
  std::cerr << "benchmark failed: " << status << "\n";
  return 1;
}

std::string Verdict(double ratio, double target) {
  return absl::StrFormat("%.2f of ceiling (target %.2f): %s", ratio, target,
                         ratio >= target ? "MET" : "MISSED");
}

std::string MetOrMissed(double ratio, double target) {
  return absl::StrFormat("%.2f (target >= %.2f): %s", ratio, target,
                         ratio >= target ? "MET" : "MISSED");
}

}  // namespace dlock::bench
