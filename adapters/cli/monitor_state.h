// Copyright dlock authors. What `dlock monitor` decides from each listing,
// as pure code (tested in adapters/tests/monitor_state_test.cc): which locks
// crossed the held-too-long threshold and which stopped being held too long,
// whose holders are dead, and the monitor's own metrics as Prometheus text.
#ifndef DLOCK_ADAPTERS_CLI_MONITOR_STATE_H_
#define DLOCK_ADAPTERS_CLI_MONITOR_STATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dlock/lock.h"

namespace dlock::cli {

// One change in what is held too long. Reported once when a hold (a name
// with a fencing token) crosses the threshold, and once when that hold ends:
// released (or expired, or force-unlocked) or taken over by another holder.
// A hold that stays over the threshold is not reported again, so that a lock
// stuck for hours logs two lines, not one per scan.
struct HeldTooLongEvent {
  enum Kind { kCrossed, kReleased, kHolderChanged };
  Kind kind;
  LockInfo lock;  // as listed when it crossed (for kCrossed: now)
  absl::Duration held_for;
  // kHolderChanged: the new holder, as listed now.
  std::string new_owner;
  uint64_t new_fencing_token = 0;
};

// Remembers the holds reported as held too long, between scans.
class HeldTooLongTracker {
 public:
  explicit HeldTooLongTracker(absl::Duration threshold)
      : threshold_(threshold) {}

  // Compares a complete listing taken at `now` with the last one. Holds
  // whose start the backend did not report are never counted.
  std::vector<HeldTooLongEvent> Update(const std::vector<LockInfo>& locks,
                                       absl::Time now);

  // How many holds are over the threshold now.
  size_t over_threshold() const { return reported_.size(); }

 private:
  struct Reported {
    LockInfo lock;
    absl::Duration held_for;
  };
  const absl::Duration threshold_;
  absl::flat_hash_map<std::string, Reported> reported_;  // by lock name
};

// The locks `--unlock-dead` removes: held, and the backend says the
// holder's liveness record is gone (holder_live == false). Unknown liveness
// is never taken for dead.
std::vector<LockInfo> DeadHolders(const std::vector<LockInfo>& locks);

// A line for the log: "<UTC time> <event> name=\"...\" owner=\"...\" ...".
std::string FormatEvent(const HeldTooLongEvent& event, absl::Duration threshold,
                        absl::Time now);

// The monitor's gauges and counters, labelled by namespace only (bounded
// cardinality), rendered in the Prometheus text exposition format. Written
// by the scan loop, read by the metrics server's thread.
class MonitorMetrics {
 public:
  explicit MonitorMetrics(std::string lock_namespace)
      : namespace_(std::move(lock_namespace)) {}

  void ScanSucceeded(size_t locks_held, size_t held_too_long);
  void ScanFailed();
  void HookRan(bool succeeded);
  void ForceUnlocked();

  std::string RenderText() const;

 private:
  const std::string namespace_;
  mutable absl::Mutex mu_;
  int64_t locks_held_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t held_too_long_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t scans_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t scan_errors_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t hook_runs_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t hook_failures_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t force_unlocks_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_scan_ ABSL_GUARDED_BY(mu_) = absl::UnixEpoch();
};

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_MONITOR_STATE_H_
