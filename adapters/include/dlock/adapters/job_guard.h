// Copyright dlock authors. Running a scheduled job at most once across the
// cluster for a schedule slot, with ShedLock's lock_at_most_for and
// lock_at_least_for.
//
// Design. Each run uses one lock name in the client's namespace, the run
// key "<job>@<slot>" (or "<job>" when no slot is given), with '%', '@' and
// '#' percent-encoded in <job> and <slot> (%25, %40, %23), so that no job
// and slot can take another's name (job "a@b" is not job "a" in slot "b");
// '#' stays escaped so that run keys keep the names earlier versions gave
// them. Each run takes a fresh random owner token, so the job may use any
// threads.
//  1. Try the run key, with lease = lock_at_most_for and no watchdog: a
//     node that crashes mid-job blocks the slot for at most that long. A
//     try that meets a failover (Unavailable) is tried again, with backoff,
//     for up to JobOptions::ride_out.
//     Refused: the key is either held by a running node (kSkippedRunning)
//     or kept after a recent run (kSkippedRecentlyRan); Inspect() tells
//     them apart (LockInfo::kept_after_release). That look comes after the
//     refusal, so a run that ends in between is reported as recently ran,
//     and a keep that ends in between as running: either way the job did
//     not run here, which is all the outcome promises.
//  2. Run the job.
//  3. If it took less than lock_at_least_for, release the run key keeping
//     it for the rest (Hold::ReleaseAndKeepFor(lock_at_least_for -
//     elapsed)); otherwise just release it.
// The keep is the lock itself, taken by nobody on the backend until it
// ends on the backend's clock: nothing in this process or its client has
// to live on, so a process run from cron may close its client and exit
// right after Run(). Both the lease and the keep count from a moment no
// earlier than the job's start (the time is read before the acquire is
// sent, and the keep is computed from it when the release is sent), so a
// node with a skewed wall clock cannot run the slot again before start +
// lock_at_least_for. If the release cannot be confirmed, the core retries
// it in the background with what is left of the keep (C21); should no
// retry get through, the run key expires after lock_at_most_for, which is
// later still. A job that ran past lock_at_most_for lost the key: nothing
// is kept, and JobResult::lock_status says so.
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
  // How long a run rides out a backend that is transiently unavailable (a
  // failover under way) before it gives up with Unavailable: the job runs a
  // little late rather than not at all on any node. Never past slot_ends.
  // Zero: one try. A run lock held elsewhere is never waited for.
  absl::Duration ride_out = absl::Seconds(10);
};

struct JobContext {
  std::string job_name;
  std::string slot;
  uint64_t fencing_token = 0;  // of the run lock; pass it to what you write
  absl::Time started;
  // Fires when lock_at_most_for has passed, or the run lock is lost sooner
  // (force-unlocked, its client's liveness lapsed): another node may start
  // the job; stop touching shared state.
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
  // Until when the run key is kept after the run (start +
  // lock_at_least_for, as this node's clock reckons it); InfinitePast if
  // it was not kept.
  absl::Time kept_until = absl::InfinitePast();
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
  // (InvalidArgument), the backend unreachable (Unavailable). Once it
  // returns, the client may be closed and the process may exit: the slot
  // stays closed on the backend.
  absl::StatusOr<JobResult> Run(absl::string_view job_name,
                                const JobOptions& options, const Job& job);

 private:
  LockClient& client_;
};

// The lock name a run uses, for introspection and tests: see the encoding
// above. A job whose run lock name would exceed 512 bytes is refused by
// Run().
std::string JobRunLockName(absl::string_view job_name, absl::string_view slot);

}  // namespace dlock

#endif  // DLOCK_ADAPTERS_JOB_GUARD_H_
