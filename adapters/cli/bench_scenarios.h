// Copyright dlock authors. What `dlock bench` measures, on any backend,
// through the public API only: the figures a team compares backends by
// (docs/cli.md, docs/benchmarks.md).
#ifndef DLOCK_ADAPTERS_CLI_BENCH_SCENARIOS_H_
#define DLOCK_ADAPTERS_CLI_BENCH_SCENARIOS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench_histogram.h"
#include "dlock/cancel.h"
#include "dlock/client.h"

namespace dlock::cli::bench {

// Opens a new client on the backend under test, in the benchmark's
// namespace, with these options.
using Connector =
    std::function<absl::StatusOr<std::unique_ptr<LockClient>>(ClientOptions)>;

struct Settings {
  Connector connect;
  // Every name the run uses starts with this: runs never share a name.
  std::string name_prefix;
  absl::Duration duration = absl::Seconds(2);       // what is measured
  absl::Duration warmup = absl::Milliseconds(200);  // before, not counted
  // An Acquire() that should not wait at all still gets a bound, so that a
  // backend that stops answering (or keeps answering Unavailable, which the
  // core retries) fails the run instead of hanging it.
  absl::Duration unanswered_bound = absl::Seconds(30);
  // Cancelled: every scenario stops at once (waits included), releases what
  // it holds and returns Cancelled.
  CancelToken stop;
};

// Pairs (uncontended, contention, the primitives') take an explicit lease,
// as the peers of the comparative report do: no watchdog, so that what is
// compared is the acquire and the release. The watchdog has a scenario of
// its own.
inline constexpr absl::Duration kPairLease = absl::Seconds(10);

// What a stopped run returns.
absl::Status Interrupted();
// Closes the client; the first error of the run wins over Close()'s.
absl::Status CloseAfter(LockClient& client, absl::Status run);

// How long the memory scenario's distinct names may take: ten times the
// duration, at least 30 s.
absl::Duration MemoryNamesBudget(const Settings& settings);

// `threads` threads of one client, each on a name of its own, take (with a
// 10 s lease, no watchdog) and release their lock as fast as they can.
struct Uncontended {
  int threads = 0;
  double seconds = 0;
  double pairs_per_sec = 0;
  Percentiles acquire_us;
  Percentiles release_us;
};
absl::StatusOr<Uncontended> RunUncontended(const Settings& settings,
                                           int threads);

// Thread `t`'s acquisition of a pair (its release is the Hold's).
using PairAcquire = std::function<absl::StatusOr<Hold>(int t)>;
// `threads` threads run acquire+release pairs through `acquire` as fast as
// they can: after a warm-up (each thread's warm-up and first pair), over
// the duration. What RunUncontended() and the primitives' pairs measure.
absl::StatusOr<Uncontended> MeasurePairs(const Settings& settings, int threads,
                                         const PairAcquire& acquire);

// `clients` clients (a connection each, as separate machines would have)
// take (with a 10 s lease) and release one name. A hand-off is the next
// acquisition by another client; its latency runs from the holder's Release()
// call to the acquirer's Acquire() returning.
struct Contention {
  int clients = 0;
  double seconds = 0;
  double acquisitions_per_sec = 0;
  double handoffs_per_sec = 0;
  Percentiles handoff_us;
  std::vector<double> shares;  // of the acquisitions, per client
  double jain = 0;
  double longest_wait_ms = 0;  // from an Acquire() call to its return
};
absl::StatusOr<Contention> RunContention(const Settings& settings, int clients);

// `locks` locks held by one client under the watchdog with `lease` (renewed
// at a third of it), for the longer of the duration and three renewal
// intervals: the backend calls the renewals cost and the client's CPU.
struct Watchdog {
  int locks = 0;
  absl::Duration lease;
  double seconds = 0;
  double renew_calls_per_sec = 0;  // backend calls; a batch is one
  double renewals_per_sec = 0;     // holds renewed
  double client_cpu_fraction = 0;  // of one core, the whole process
};
absl::StatusOr<Watchdog> RunWatchdog(const Settings& settings, int locks,
                                     absl::Duration lease);

// Client memory (glibc's heap in use) per held lock with `locks` held, the
// server's where it reports its memory (LockAdmin::ServerMemoryUse()), and
// the heap left over after `names` distinct names were each taken and
// released once: what a long-lived client keeps per name it ever used. The
// names stop at MemoryNamesBudget() if they take longer; `names` says how
// many were done.
struct Memory {
  int locks = 0;
  double client_bytes_per_held_lock = 0;
  std::optional<double> server_bytes_per_held_lock;
  std::string server_note;  // what the server figure is, or why there is none
  int names_asked = 0;
  int names = 0;
  int64_t client_bytes_retained_after_names = 0;
};
absl::StatusOr<Memory> RunMemory(const Settings& settings, int locks,
                                 int names);

}  // namespace dlock::cli::bench

#endif  // DLOCK_ADAPTERS_CLI_BENCH_SCENARIOS_H_
