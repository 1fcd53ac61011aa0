// Copyright dlock authors. What the zk:// backend keeps of one hold: the
// holder node as this client last wrote it, handed to the core as the hold's
// HoldRecord (dlock/backend/backend.h) and back on every later call about
// that hold, as Curator's InterProcessMutex keeps the lock path per thread.
// The backend has no table of holds of its own.
#ifndef DLOCK_BACKENDS_ZOOKEEPER_ZK_HOLD_H_
#define DLOCK_BACKENDS_ZOOKEEPER_ZK_HOLD_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "dlock/backend/backend.h"
#include "dlock/clock.h"
#include "zk_layout.h"

namespace dlock::zk {

// A holder node as last written or read: the copy a call works on.
struct LocalHold {
  std::string path;
  NodeData data;
  int32_t version = 0;
  uint64_t czxid = 0;
  int64_t mtime = 0;        // of the last write, on ZooKeeper's clock
  uint64_t generation = 0;  // our session that owns the node; 0: another's
  // When the last write that ZooKeeper confirmed was sent: its lease began
  // no earlier (C19).
  MonoTime confirmed;
};

// One hold of this client: one node (its path, czxid and session never
// change), written by re-entries, renewals and releases that may run on
// several threads at once (a caller's and the core's renewer), so the rest
// is guarded here. Always made by std::make_shared: a re-entry hands the same
// record back to the core.
class ZkHold final : public HoldRecord,
                     public std::enable_shared_from_this<ZkHold> {
 public:
  ZkHold(absl::string_view name, absl::string_view owner,
         const HoldShape& shape, LocalHold hold)
      : name_(name),
        owner_(owner),
        shape_{.kind = shape.kind, .mode = shape.mode},
        generation_(hold.generation),
        hold_(hold) {}

  // Only records this backend made come back to it.
  static ZkHold* Of(HoldRecord* record) { return static_cast<ZkHold*>(record); }
  static const ZkHold* Of(const HoldRecord* record) {
    return static_cast<const ZkHold*>(record);
  }

  const std::string& name() const { return name_; }
  const std::string& owner() const { return owner_; }
  // Which of the owner's holds of the name (kind and mode).
  const HoldShape& shape() const { return shape_; }
  uint64_t generation() const { return generation_; }

  // Whether the hold may still be believed: not given up (released, gone,
  // its lease ran out as far as we know) and not lost with its session.
  // Lock-free: HeldUntil() reads it under the core's lock.
  bool live() const { return live_.load(std::memory_order_acquire); }

  LocalHold Get() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return hold_;
  }

  // A write of ours to the node was confirmed: `hold` is the node after it.
  // Writes that raced are ordered by the node's version; the latest stays.
  void Wrote(const LocalHold& hold) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (hold.version > hold_.version) hold_ = hold;
  }

  // The node is gone, not the owner's any more, its lease ran out, or its
  // delete was sent: the hold is no longer believed, and later calls about
  // it read its node from ZooKeeper.
  void End() { live_.store(false, std::memory_order_release); }

  // Lost with its session: from now on release and renewal fail at once
  // with `why`. Returns the node as last written if the hold was live
  // (nullopt when it had ended already).
  std::optional<LocalHold> LoseWithSession(const absl::Status& why)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!live_.exchange(false, std::memory_order_acq_rel)) {
      return std::nullopt;
    }
    lost_ = why;
    return hold_;
  }

  // This client's writes to the node (re-entries, renewals, the watchdog's
  // batch, releases) take turns: each starts from the version the one
  // before it left, so they never conflict with one another, and a
  // versioned write fails only when another client wrote the node. Taken
  // before mu_, and held across the write's round trip.
  absl::Mutex& write_turn() ABSL_LOCK_RETURNED(write_turn_) {
    return write_turn_;
  }

  // Why the hold was lost with its session, if it was.
  std::optional<absl::Status> lost() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return lost_;
  }

 private:
  const std::string name_;   // for BackendListener::OnHoldLost()
  const std::string owner_;  // "
  const HoldShape shape_;    // "
  const uint64_t generation_;
  std::atomic<bool> live_{true};
  absl::Mutex write_turn_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  LocalHold hold_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> lost_ ABSL_GUARDED_BY(mu_);
};

// The hold's node is gone, not the owner's, its lease ran out, or its
// delete was sent: its record (if any) is believed no more.
inline void Forget(ZkHold* record) {
  if (record != nullptr) record->End();
}

// The records of holds on this backend's sessions, so that each learns when
// its session ends. Not a hold table: the core owns the records, nothing is
// looked up here, and a record the core dropped falls out at the next
// prune.
class SessionHolds {
 public:
  // The record of a hold just granted, handed to the core in Grant::record;
  // registered when the node lives on one of our sessions.
  std::shared_ptr<ZkHold> NewRecord(const AcquireCall& call,
                                    const LocalHold& hold)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Marks every live hold of session `generation` lost with `why` (their
  // release and renewal fail at once from now on), and returns them with
  // their nodes as last written.
  std::vector<std::pair<std::shared_ptr<ZkHold>, LocalHold>> LoseSession(
      uint64_t generation, const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Taken before a record's own mutex, never after it; never held while
  // calling the listener.
  absl::Mutex mu_;
  std::vector<std::weak_ptr<ZkHold>> holds_ ABSL_GUARDED_BY(mu_);
  size_t prune_at_ ABSL_GUARDED_BY(mu_) = 64;
};

}  // namespace dlock::zk

#endif  // DLOCK_BACKENDS_ZOOKEEPER_ZK_HOLD_H_
