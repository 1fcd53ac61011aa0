#include "bench_scenarios.h"

#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "dlock/backend/forwarding_backend.h"
#include "dlock/lock.h"

namespace dlock::cli::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;
using Instant = SteadyClock::time_point;

int64_t NanosBetween(Instant from, Instant to) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(to - from)
      .count();
}

double SecondsBetween(Instant from, Instant to) {
  return static_cast<double>(NanosBetween(from, to)) / 1e9;
}

Instant After(Instant from, absl::Duration d) {
  return from + absl::ToChronoNanoseconds(d);
}

// The first error of any thread; the others stop at their next turn.
class FirstError {
 public:
  void Note(const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = status;
    failed_.store(true, std::memory_order_relaxed);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  absl::Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  std::mutex mu_;
  absl::Status status_;
  std::atomic<bool> failed_{false};
};

void RunThreads(int count, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  threads.reserve(count);
  for (int i = 0; i < count; ++i) threads.emplace_back(body, i);
  for (std::thread& t : threads) t.join();
}

// Counts the renewals that reach the backend, as the watchdog sends them.
class RenewalCounter : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::Status Renew(const RenewCall& call) override {
    calls_.fetch_add(1, std::memory_order_relaxed);
    renewals_.fetch_add(1, std::memory_order_relaxed);
    return ForwardingBackend::Renew(call);
  }
  std::vector<absl::Status> RenewMany(
      absl::Span<const RenewCall> calls) override {
    calls_.fetch_add(1, std::memory_order_relaxed);
    renewals_.fetch_add(static_cast<int64_t>(calls.size()),
                        std::memory_order_relaxed);
    return ForwardingBackend::RenewMany(calls);
  }
  int64_t calls() const { return calls_.load(); }
  int64_t renewals() const { return renewals_.load(); }

 private:
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> renewals_{0};
};

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Chunks from the heap and those glibc maps on their own (large vectors).
int64_t HeapInUse() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
}

// Takes the locks (spread over a few threads, since a round trip each would
// take long on a slow backend) and keeps their holds.
absl::StatusOr<std::vector<Hold>> HoldAll(
    const Settings& settings,
    std::vector<std::unique_ptr<DistributedLock>>& locks) {
  const int threads = std::min<int>(8, static_cast<int>(locks.size()));
  std::vector<std::optional<Hold>> holds(locks.size());
  FirstError error;
  RunThreads(threads, [&](int t) {
    for (size_t i = t; i < locks.size() && !error.failed(); i += threads) {
      absl::StatusOr<Hold> held = locks[i]->Acquire(
          {.wait = settings.unanswered_bound, .cancel = settings.stop});
      if (!held.ok()) return error.Note(held.status());
      holds[i] = *std::move(held);
    }
  });
  if (settings.stop.IsCancelled()) return Interrupted();
  if (error.failed()) {
    // A backend may keep a connection per hold (PostgreSQL in session mode):
    // say what was asked, so that the fix is plain.
    const absl::Status s = error.status();
    return absl::Status(
        s.code(), absl::StrCat("holding ", locks.size(),
                               " locks at once (--locks): ", s.message()));
  }
  std::vector<Hold> out;
  out.reserve(holds.size());
  for (std::optional<Hold>& h : holds) out.push_back(*std::move(h));
  return out;
}

absl::Status ReleaseAll(std::vector<Hold>& holds) {
  const int threads = std::min<int>(8, static_cast<int>(holds.size()));
  FirstError error;
  RunThreads(threads, [&](int t) {
    for (size_t i = t; i < holds.size(); i += threads) {
      if (absl::Status s = holds[i].Release(); !s.ok()) error.Note(s);
    }
  });
  return error.status();
}

absl::StatusOr<std::vector<std::unique_ptr<DistributedLock>>> LocksNamed(
    LockClient& client, const std::string& prefix, int count) {
  std::vector<std::unique_ptr<DistributedLock>> locks;
  locks.reserve(count);
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
        client.GetLock(absl::StrCat(prefix, i));
    if (!lock.ok()) return lock.status();
    locks.push_back(*std::move(lock));
  }
  return locks;
}

}  // namespace

absl::Status Interrupted() {
  return absl::CancelledError("interrupted; what was held is released");
}

absl::Status CloseAfter(LockClient& client, absl::Status run) {
  absl::Status closed = client.Close();
  return run.ok() ? closed : run;
}

absl::Duration MemoryNamesBudget(const Settings& settings) {
  return std::max(10 * settings.duration, absl::Seconds(30));
}

absl::StatusOr<Uncontended> MeasurePairs(const Settings& settings, int threads,
                                         const PairAcquire& acquire_for) {
  std::vector<LatencyHistogram> acquire(threads), release(threads);
  std::vector<int64_t> pairs(threads, 0);
  std::vector<Instant> last_end(threads);
  FirstError error;
  // Each thread warms up for the warm-up and at least one pair (a first
  // acquire may connect or create a path, and on a loaded machine outlast
  // the warm-up and the window both); the window starts when every thread
  // has, as the peers' of the comparative report does.
  const Instant warm_until = After(SteadyClock::now(), settings.warmup);
  Instant start;
  Instant end;
  std::barrier warmed_up(threads, [&]() noexcept {
    start = SteadyClock::now();
    end = After(start, settings.duration);
  });
  auto pair = [&](int t) -> std::optional<Instant> {
    absl::StatusOr<Hold> held = acquire_for(t);
    const Instant t1 = SteadyClock::now();
    absl::Status s = held.ok() ? held->Release() : held.status();
    if (!s.ok()) {
      error.Note(s);
      return std::nullopt;
    }
    return t1;
  };
  RunThreads(threads, [&](int t) {
    do {
      if (error.failed() || settings.stop.IsCancelled() || !pair(t)) {
        return warmed_up.arrive_and_drop();  // the others must not wait
      }
    } while (SteadyClock::now() < warm_until);
    warmed_up.arrive_and_wait();
    for (Instant t0 = SteadyClock::now();
         t0 < end && !error.failed() && !settings.stop.IsCancelled();
         t0 = SteadyClock::now()) {
      const std::optional<Instant> t1 = pair(t);
      if (!t1) return;
      const Instant t2 = SteadyClock::now();
      acquire[t].Add(NanosBetween(t0, *t1));
      release[t].Add(NanosBetween(*t1, t2));
      ++pairs[t];
      last_end[t] = t2;
    }
  });
  if (settings.stop.IsCancelled()) return Interrupted();
  if (error.failed()) return error.status();

  Uncontended out;
  out.threads = threads;
  LatencyHistogram all_acquire, all_release;
  int64_t total = 0;
  Instant measured_end = end;
  for (int t = 0; t < threads; ++t) {
    all_acquire.Merge(acquire[t]);
    all_release.Merge(release[t]);
    total += pairs[t];
    if (pairs[t] > 0) measured_end = std::max(measured_end, last_end[t]);
  }
  out.seconds = SecondsBetween(start, measured_end);
  out.pairs_per_sec = static_cast<double>(total) / out.seconds;
  out.acquire_us = all_acquire.Get();
  out.release_us = all_release.Get();
  return out;
}

absl::StatusOr<Uncontended> RunUncontended(const Settings& settings,
                                           int threads) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = settings.connect({});
  if (!client.ok()) return client.status();
  absl::StatusOr<std::vector<std::unique_ptr<DistributedLock>>> locks =
      LocksNamed(**client,
                 absl::StrCat(settings.name_prefix, "u", threads, "-"),
                 threads);
  if (!locks.ok()) return CloseAfter(**client, locks.status());
  absl::StatusOr<Uncontended> out = MeasurePairs(settings, threads, [&](int t) {
    return (*locks)[t]->Acquire({.wait = settings.unanswered_bound,
                                 .lease = kPairLease,
                                 .cancel = settings.stop});
  });
  absl::Status closed = CloseAfter(**client, out.status());
  if (!closed.ok()) return closed;
  return out;
}

absl::StatusOr<Contention> RunContention(const Settings& settings,
                                         int clients) {
  std::vector<std::unique_ptr<LockClient>> connected;
  std::vector<std::unique_ptr<DistributedLock>> locks;
  const std::string name = absl::StrCat(settings.name_prefix, "c", clients);
  auto close_all = [&](absl::Status run) {
    for (auto& c : connected) run = CloseAfter(*c, run);
    return run;
  };
  for (int i = 0; i < clients; ++i) {
    absl::StatusOr<std::unique_ptr<LockClient>> client = settings.connect({});
    if (!client.ok()) return close_all(client.status());
    connected.push_back(*std::move(client));
    absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
        connected.back()->GetLock(name);
    if (!lock.ok()) return close_all(lock.status());
    locks.push_back(*std::move(lock));
  }

  // Written only by the holder, under the lock being measured; the mutex
  // makes that visible to the next holder whatever the backend.
  std::mutex last_mu;
  int last_holder = -1;
  Instant last_release;
  std::vector<int64_t> counts(clients, 0);
  std::vector<int64_t> longest_wait(clients, 0);
  LatencyHistogram handoffs;  // under last_mu
  FirstError error;
  const Instant start = After(SteadyClock::now(), settings.warmup);
  const Instant end = After(start, settings.duration);
  // A waiter may queue behind every other client for the whole run.
  const absl::Duration wait =
      settings.duration + settings.warmup + settings.unanswered_bound;
  RunThreads(clients, [&](int c) {
    for (Instant t0 = SteadyClock::now();
         t0 < end && !error.failed() && !settings.stop.IsCancelled();
         t0 = SteadyClock::now()) {
      absl::StatusOr<Hold> held = locks[c]->Acquire(
          {.wait = wait, .lease = kPairLease, .cancel = settings.stop});
      const Instant t1 = SteadyClock::now();
      if (!held.ok()) return error.Note(held.status());
      {
        std::lock_guard<std::mutex> lock(last_mu);
        // Counted by when it was had: a wait begun while warming up counts.
        if (t1 >= start) {
          ++counts[c];
          longest_wait[c] = std::max(longest_wait[c], NanosBetween(t0, t1));
          if (last_holder >= 0 && last_holder != c) {
            handoffs.Add(NanosBetween(last_release, t1));
          }
        }
        last_holder = c;
        last_release = SteadyClock::now();
      }
      if (absl::Status s = held->Release(); !s.ok()) return error.Note(s);
    }
  });
  const Instant measured_end = std::max(end, SteadyClock::now());
  absl::Status closed =
      close_all(settings.stop.IsCancelled() ? Interrupted() : error.status());
  if (!closed.ok()) return closed;

  Contention out;
  out.clients = clients;
  out.seconds = SecondsBetween(start, measured_end);
  int64_t total = 0;
  for (int c = 0; c < clients; ++c) {
    total += counts[c];
    out.longest_wait_ms = std::max(out.longest_wait_ms,
                                   static_cast<double>(longest_wait[c]) / 1e6);
  }
  for (int c = 0; c < clients; ++c) {
    out.shares.push_back(total == 0 ? 0
                                    : static_cast<double>(counts[c]) /
                                          static_cast<double>(total));
  }
  out.jain = JainIndex(out.shares.data(), clients);
  out.acquisitions_per_sec = static_cast<double>(total) / out.seconds;
  out.handoffs_per_sec = static_cast<double>(handoffs.count()) / out.seconds;
  out.handoff_us = handoffs.Get();
  return out;
}

absl::StatusOr<Watchdog> RunWatchdog(const Settings& settings, int locks,
                                     absl::Duration lease) {
  RenewalCounter* counter = nullptr;  // owned by the client
  ClientOptions options;
  options.watchdog_lease = lease;
  options.backend_decorator = [&](std::unique_ptr<Backend> backend) {
    auto wrapped = std::make_unique<RenewalCounter>(std::move(backend));
    counter = wrapped.get();
    return wrapped;
  };
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      settings.connect(std::move(options));
  if (!client.ok()) return client.status();
  absl::StatusOr<std::vector<std::unique_ptr<DistributedLock>>> handles =
      LocksNamed(**client, absl::StrCat(settings.name_prefix, "w-"), locks);
  if (!handles.ok()) return CloseAfter(**client, handles.status());
  absl::StatusOr<std::vector<Hold>> holds = HoldAll(settings, *handles);
  if (!holds.ok()) return CloseAfter(**client, holds.status());

  const absl::Duration window = std::max(settings.duration, lease);
  const int64_t calls_before = counter->calls();
  const int64_t renewals_before = counter->renewals();
  const double cpu_before = CpuSeconds();
  const Instant start = SteadyClock::now();
  absl::Notification stopped;
  {
    ScopedCancelCallback on_stop(settings.stop, [&] { stopped.Notify(); });
    stopped.WaitForNotificationWithTimeout(window);
  }
  if (settings.stop.IsCancelled()) {
    ReleaseAll(*holds).IgnoreError();  // Close() releases what is left
    return CloseAfter(**client, Interrupted());
  }
  const double seconds = SecondsBetween(start, SteadyClock::now());
  Watchdog out;
  out.locks = locks;
  out.lease = lease;
  out.seconds = seconds;
  out.client_cpu_fraction = (CpuSeconds() - cpu_before) / seconds;
  out.renew_calls_per_sec =
      static_cast<double>(counter->calls() - calls_before) / seconds;
  out.renewals_per_sec =
      static_cast<double>(counter->renewals() - renewals_before) / seconds;
  for (const Hold& h : *holds) {
    if (h.state() != LockState::kHeld) {
      return CloseAfter(
          **client,
          absl::UnavailableError(absl::StrCat(
              "the watchdog lost '", h.lock_name(), "' during the run",
              " (the backend did not renew it in time)")));
    }
  }
  absl::Status released = ReleaseAll(*holds);
  absl::Status closed = CloseAfter(**client, released);
  if (!closed.ok()) return closed;
  return out;
}

absl::StatusOr<Memory> RunMemory(const Settings& settings, int locks,
                                 int names) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = settings.connect({});
  if (!client.ok()) return client.status();
  LockClient& c = **client;
  Memory out;
  out.locks = locks;
  out.names_asked = names;

  // Held: handles and holds, as a service keeps them.
  absl::StatusOr<ServerMemory> server_before = c.Admin().ServerMemoryUse();
  const int64_t heap_before = HeapInUse();
  absl::StatusOr<std::vector<std::unique_ptr<DistributedLock>>> handles =
      LocksNamed(c, absl::StrCat(settings.name_prefix, "m-"), locks);
  if (!handles.ok()) return CloseAfter(c, handles.status());
  absl::StatusOr<std::vector<Hold>> holds = HoldAll(settings, *handles);
  if (!holds.ok()) return CloseAfter(c, holds.status());
  out.client_bytes_per_held_lock =
      static_cast<double>(HeapInUse() - heap_before) / locks;
  absl::StatusOr<ServerMemory> server_after = c.Admin().ServerMemoryUse();
  if (server_before.ok() && server_after.ok()) {
    out.server_bytes_per_held_lock =
        static_cast<double>(server_after->bytes - server_before->bytes) / locks;
    out.server_note = server_after->source;
  } else {
    out.server_note = std::string(
        (server_before.ok() ? server_after : server_before).status().message());
  }
  if (absl::Status s = ReleaseAll(*holds); !s.ok()) return CloseAfter(c, s);
  holds->clear();
  handles->clear();

  // Distinct names, one after another, nothing kept: after a first round
  // that lets every pool and cache reach its size, the heap should not grow.
  // Bounded in time: a slow backend does fewer names, and says how many.
  const Instant deadline =
      After(SteadyClock::now(), MemoryNamesBudget(settings));
  auto take_and_release = [&](const std::string& prefix, int count, int& done) {
    for (done = 0; done < count && SteadyClock::now() < deadline; ++done) {
      if (settings.stop.IsCancelled()) return Interrupted();
      absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
          c.GetLock(absl::StrCat(prefix, done));
      if (!lock.ok()) return lock.status();
      absl::StatusOr<Hold> held = (*lock)->Acquire(
          {.wait = settings.unanswered_bound, .cancel = settings.stop});
      if (!held.ok()) return held.status();
      if (absl::Status s = held->Release(); !s.ok()) return s;
    }
    return absl::OkStatus();
  };
  int warm = 0;
  if (absl::Status s =
          take_and_release(absl::StrCat(settings.name_prefix, "n0-"),
                           std::min(names, 1000), warm);
      !s.ok()) {
    return CloseAfter(c, s);
  }
  const int64_t names_before = HeapInUse();
  if (absl::Status s = take_and_release(
          absl::StrCat(settings.name_prefix, "n-"), names, out.names);
      !s.ok()) {
    return CloseAfter(c, s);
  }
  // A heap that shrank meanwhile (a buffer of the backend's client freed)
  // kept nothing: retention is never negative.
  out.client_bytes_retained_after_names =
      std::max<int64_t>(0, HeapInUse() - names_before);
  if (absl::Status s = c.Close(); !s.ok()) return s;
  return out;
}

}  // namespace dlock::cli::bench
