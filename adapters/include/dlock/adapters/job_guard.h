// Copyright dlock authors. Running a scheduled job at most once across the
// cluster for a schedule slot, with ShedLock's lock_at_most_for and
// lock_at_least_for.
//
// Design. Each run uses two lock names in the client's namespace:
//   run key     "<job>@<slot>"        (or "<job>" when no slot is given)
//   marker key  "<run key>#ran"
// with '%', '@' and '#' percent-encoded in <job> and <slot> (%25, %40, %23),
// so that no job, slot or marker can take another's name (job "a@b" is not
// job "a" in slot "b", nor job "x#ran" the marker of job "x"); and a fresh
// random owner token, so the job may use any threads.
//  1. Try the run key once, with lease = lock_at_most_for and no watchdog:
//     a node that crashes mid-job blocks the slot for at most that long.
//     Held by another node: skipped (kSkippedRunning).
//  2. Look at the marker key. Held: the job ran less than lock_at_least_for
//     ago; release the run key and skip (kSkippedRecentlyRan).
//  3. Run the job.
//  4. If it took less than lock_at_least_for, take the marker key with
//     lease = lock_at_least_for - elapsed, *then* release the run key.
//     Otherwise just release the run key.
// Why a marker: a lease can be extended but never shortened (C5), and a
// fast job must keep others out until start + lock_at_least_for, not until
// start + lock_at_most_for. The marker is taken while the run key is still
// held and checked by the next runner only once it holds the run key, so no
// runner can slip between the two. Both leases run on the backend's clock
// and count from a moment no earlier than the job's start, so a node with a
// skewed wall clock cannot run the slot again before start +
// lock_at_least_for. If the marker cannot be taken, the run key is left to
// expire after lock_at_most_for, which is later still.
//
// The guard leaves each marker (and a run lock whose marker could not be
// taken) to run out with its lease (Hold::KeepUntilLeaseEnd): the client
// keeps it, unreleased, until then, whatever becomes of the guard, so a
// guard may be made for one run. Closing a client, though, releases every
// lock it holds (C13), the marker too. A long-running service keeps its
// client anyway; a process that exits right after the job (cron style) must
// keep its client open until ScheduledJobGuard::markers_expire() —
// WaitOutMarkers() does that — or the slot may run again early. (A core way
// to let a hold outlive its client would remove this wait.)
//
// As with ShedLock, the guarantees end when the leases do: a job that runs
// past lock_at_most_for may be started again elsewhere (its context's cancel
// token fires then), and a node whose clock is off by more than
// lock_at_least_for may compute a slot it thinks is new. Put the slot in the
// name (JobOptions::slot) to make a slot runnable once for as long as the
// leases last, choose lock_at_least_for above the clock skew you expect, and
// for a slot computed from the clock give its end (JobOptions::slot_ends):
// the slot then stays closed until lock_at_least_for past its end, so a
// node whose clock runs behind cannot run it again once it ended here.
#ifndef DLOCK_ADAPTERS_JOB_GUARD_H_
#define DLOCK_ADAPTERS_JOB_GUARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dlock/cancel.h"
#include "dlock/client.h"
#include "dlock/hold.h"

namespace dlock {

struct JobOptions {
  // Required: the longest the job may keep others out; the run lock's lease.
  absl::Duration lock_at_most_for = absl::ZeroDuration();
  // The shortest time, from the start, before the job may run again.
  absl::Duration lock_at_least_for = absl::ZeroDuration();
  // The schedule slot, e.g. "2026-11-22T01:00Z". Empty: the job name alone.
  std::string slot;
  // When the slot ends by this node's clock, for a slot derived from it.
  // Set: a run that finishes keeps the slot closed until slot_ends plus
  // lock_at_least_for (at least), so that a node whose clock runs behind
  // by less than lock_at_least_for, and so computes this slot after it
  // ended here, finds it closed. InfinitePast: not used.
  absl::Time slot_ends = absl::InfinitePast();
};

struct JobContext {
  std::string job_name;
  std::string slot;
  uint64_t fencing_token = 0;  // of the run lock; pass it to what you write
  absl::Time started;
  // Fires when lock_at_most_for has passed: the lock is gone and another
  // node may start the job; stop touching shared state.
  CancelToken cancel;
};

enum class JobOutcome {
  kRan,
  kSkippedRunning,      // another node holds the run lock
  kSkippedRecentlyRan,  // it ran less than lock_at_least_for ago
};

struct JobResult {
  JobOutcome outcome = JobOutcome::kSkippedRunning;
  absl::Status job_status;  // what the job returned, when it ran
  uint64_t fencing_token = 0;
  absl::Duration elapsed;  // how long the job ran
  // Until when the marker keeps the slot closed; InfinitePast if none.
  absl::Time marker_until = absl::InfinitePast();
  // Why the locks were not left as designed (e.g. the job outlived
  // lock_at_most_for and the lock expired); OK normally.
  absl::Status lock_status;
};

using Job = std::function<absl::Status(const JobContext&)>;

// Runs jobs through one client, which must outlive it. Thread-safe.
class ScheduledJobGuard {
 public:
  explicit ScheduledJobGuard(LockClient& client) : client_(client) {}
  ScheduledJobGuard(const ScheduledJobGuard&) = delete;
  ScheduledJobGuard& operator=(const ScheduledJobGuard&) = delete;

  // Runs `job` unless another node runs or recently ran it for this slot.
  // An error status means nothing ran: a bad option or name
  // (InvalidArgument), the backend unreachable (Unavailable).
  absl::StatusOr<JobResult> Run(absl::string_view job_name,
                                const JobOptions& options, const Job& job);

  // When the last marker this guard took runs out (InfinitePast if none).
  absl::Time markers_expire() const;
  // Sleeps until markers_expire(): call it before closing the client in a
  // process that exits after its run.
  void WaitOutMarkers() const;

 private:
  LockClient& client_;
  mutable absl::Mutex mu_;
  absl::Time last_marker_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// The lock names a run uses, for introspection and tests: see the encoding
// above. A job whose marker name would exceed 512 bytes is refused by Run().
std::string JobRunLockName(absl::string_view job_name, absl::string_view slot);
std::string JobMarkerLockName(absl::string_view job_name,
                              absl::string_view slot);

}  // namespace dlock

#endif  // DLOCK_ADAPTERS_JOB_GUARD_H_
