// Copyright dlock authors. What `dlock bench` measures of the primitives
// beyond the mutex (issue 24): permits per second of a semaphore and of a
// read-write lock's readers, and an election's hand-over time.
#ifndef DLOCK_ADAPTERS_CLI_BENCH_PRIMITIVES_H_
#define DLOCK_ADAPTERS_CLI_BENCH_PRIMITIVES_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench_histogram.h"
#include "bench_scenarios.h"

namespace dlock::cli::bench {

// Whether the backend offers a primitive (BackendTraits), and why not when
// it does not: a scenario on a backend without it measures nothing and
// says so, without failing the run.
struct Offered {
  bool semaphores = false;
  bool read_write_locks = false;
  bool elections = false;
  std::string note;  // BackendTraits::primitives_note
};
absl::StatusOr<Offered> PrimitivesOffered(const Settings& settings);

// `threads` threads of one client on ONE semaphore of `permits` permits,
// each taking one permit (a 10 s lease, no watchdog) and giving it back as
// fast as it can: permits per second. With permits >= threads nobody waits
// for a permit; what is measured is the semaphore's own cost.
absl::StatusOr<Uncontended> RunSemaphore(const Settings& settings, int threads,
                                         int64_t permits);

// `threads` threads of one client on ONE read-write lock, each taking the
// read lock (a 10 s lease) and releasing it as fast as it can: readers run
// together, so nobody waits. With `exclusive`, the write lock instead:
// writers take turns, so with more than one thread they wait for each
// other.
absl::StatusOr<Uncontended> RunReadWrite(const Settings& settings, int threads,
                                         bool exclusive);

// Two campaigners (a client each, as two machines would have) on one
// election: the leader steps down and the other, already campaigning, is
// elected. A resign hand-over runs from the leader's Resign() call to the
// other's Campaign() returning; a lapse hand-over from the end of the
// leader's lease (it neither renews nor resigns: a leader that hangs or
// dies) to the other's Campaign() returning.
struct Handover {
  int resigns = 0;
  Percentiles resign_us;
  int lapses = 0;
  absl::Duration lease;  // the lapsing leader's
  Percentiles lapse_us;
};
absl::StatusOr<Handover> RunElection(const Settings& settings, int resigns,
                                     int lapses, absl::Duration lease);

}  // namespace dlock::cli::bench

#endif  // DLOCK_ADAPTERS_CLI_BENCH_PRIMITIVES_H_
