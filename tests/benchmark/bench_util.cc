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

absl::StatusOr<double> PeerScriptRate(const std::string& script,
                                      const std::string& args,
                                      const std::string& packages) {
  std::string dir = __FILE__;
  dir = dir.substr(0, dir.rfind('/') + 1);
  const std::string output =
      CommandOutput(absl::StrCat("/usr/bin/python3 ", dir, script, " ", args));
  const size_t at = output.rfind("RATE ");
  double rate = 0;
  if (at == std::string::npos ||
      !absl::SimpleAtod(output.substr(at + 5, output.find('\n', at) - at - 5),
                        &rate) ||
      rate <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(script, " printed no rate (apt-get install -y ", packages,
                     "): ", output));
  }
  return rate;
}

absl::StatusOr<double> UncontendedPairsPerSecond(const std::string& uri,
                                                 int threads,
                                                 absl::Duration duration) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
  if (!client.ok()) return client.status();
  std::vector<std::unique_ptr<DistributedLock>> locks;
  for (int t = 0; t < threads; ++t) {
    absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
        (*client)->GetLock(absl::StrCat("bench-uncontended-", t));
    if (!lock.ok()) return lock.status();
    locks.push_back(*std::move(lock));
  }
  return LoopRate(threads, duration, [&](int t) {
    absl::StatusOr<Hold> hold = locks[t]->Acquire({.lease = absl::Seconds(10)});
    return hold.ok() ? hold->Release() : hold.status();
  });
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
    const std::vector<std::string>& command) {
  const std::string output = CommandOutput(
      absl::StrCat("redis-benchmark -h 127.0.0.1 -p ", port, " -c ", clients,
                   " -n ", requests, " -q ", absl::StrJoin(command, " ")));
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

absl::StatusOr<Paired> MeasurePaired(
    int rounds, absl::FunctionRef<absl::StatusOr<double>()> ceiling,
    absl::FunctionRef<absl::StatusOr<double>()> ours) {
  std::vector<double> ceilings, rates, ratios;
  for (int i = 0; i < rounds; ++i) {
    absl::StatusOr<double> c = ceiling();
    if (!c.ok()) return c.status();
    absl::StatusOr<double> o = ours();
    if (!o.ok()) return o.status();
    ceilings.push_back(*c);
    rates.push_back(*o);
    ratios.push_back(*o / *c);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  Paired out;
  out.ceiling = median(ceilings);
  out.ours = median(rates);
  out.ratio = median(ratios);
  out.ratio_min = *std::min_element(ratios.begin(), ratios.end());
  out.ratio_max = *std::max_element(ratios.begin(), ratios.end());
  return out;
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
  absl::StatusOr<dlock::testing::TestBackend> backend =
      dlock::testing::FindTestBackend(label);
  if (!backend.ok()) return backend.status();
  if (!backend->port) {
    return absl::InvalidArgumentError(absl::StrCat(label, " has no server"));
  }
  absl::StatusOr<int> port = backend->port();
  if (!port.ok()) return port.status();
  return BenchServer{*std::move(backend), *port};
}

int Fail(const absl::Status& status) {
  std::cerr << "benchmark failed: " << status << "\n";
  return 1;
}

std::string Verdict(double ratio, double target) {
  return absl::StrFormat("%.2f of ceiling (target %.2f): %s", ratio, target,
                         ratio >= target ? "ok" : "MISSED");
}

}  // namespace dlock::bench
