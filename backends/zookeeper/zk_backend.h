// Copyright dlock authors. The zk:// backend: Curator's InterProcessMutex
// recipe (an EPHEMERAL_SEQUENTIAL node per acquisition, each waiter watching
// only its predecessor) plus what the lock contract adds on top: a lease on
// ZooKeeper's clock, re-entry and owner tokens in the node's data, fencing
// tokens from czxid. docs/zookeeper.md explains the layout and guarantees.
#ifndef DLOCK_BACKENDS_ZOOKEEPER_ZK_BACKEND_H_
#define DLOCK_BACKENDS_ZOOKEEPER_ZK_BACKEND_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"
#include "zk_hold.h"
#include "zk_layout.h"
#include "zk_session.h"

namespace dlock::zk {

struct BackendSettings {
  Session::Options session;
  std::string chroot;  // "" or "/a/b"
  std::string lock_namespace;
  std::string client_id;
  absl::Duration fallback_poll;
  // How often the namespace is swept for kept-lock nodes long over
  // (SweepKept).
  absl::Duration kept_sweep;
  BackendListener* listener;
  const Clock* clock;
};

class ZkBackend : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create(
      BackendSettings settings);
  ~ZkBackend() override;

  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override;
  BackendTraits Traits() const override;
  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override;
  absl::Status Renew(const RenewCall& call) override;
  std::vector<absl::Status> RenewMany(
      absl::Span<const RenewCall> calls) override;
  // A hold lives on the session that created its node: ZooKeeper expires
  // that session, and deletes the node, no earlier than the session timeout
  // after the send of its latest answered request (Session's heartbeat
  // keeps that recent while the server answers). Holds of an earlier
  // session are not believed at all (C19).
  MonoTime HeldUntil(absl::string_view name, absl::string_view owner,
                     const HoldRecord* record) override;
  absl::StatusOr<LockInfo> Inspect(absl::string_view name) override;
  absl::StatusOr<std::vector<LockInfo>> List(absl::string_view prefix) override;
  absl::Status ForceUnlock(absl::string_view name) override;
  absl::Status ForceUnlockIfToken(absl::string_view name,
                                  uint64_t fencing_token) override;
  // mntr's zk_approximate_data_size from the server the session is on.
  absl::StatusOr<ServerMemory> ServerMemoryUse() override;
  void Shutdown() override;

 private:
  // Versioned writes that lost a race are tried again this many times.
  static constexpr int kWriteRetries = 5;

  // A node to delete once the connection allows: a release whose delete was
  // not confirmed, a hold presumed lost (at `version`, so that a node that
  // changed since, re-entered by another client of the same owner token,
  // stays). With `owner` set, a node of an acquisition we gave up (an
  // abandoned wait, a create whose reply was lost): its hold is taken off
  // as TakeOwnHoldOff() does. With `prefix` set, every child of `path` whose
  // name starts with it (a create whose reply was lost).
  // With `kept_path` set, a release that keeps the lock (ReleaseCall::
  // keep_for): the delete goes with the kept-lock node's create, keeping
  // the lock until `keep_until` here (nothing if that has passed).
  struct PendingDelete {
    std::string path;
    std::string prefix;
    int32_t version = -1;
    std::string owner;
    std::string kept_path;
    uint64_t kept_token = 0;
    MonoTime keep_until = MonoTime::InfinitePast();
  };

  // Our node in a lock's queue.
  struct OwnNode {
    std::string path;
    std::string name;  // the last component
    // What the node holds at stat.version: our create or last write, or
    // what we last read (another client of the same owner token may have
    // re-entered it once it was first, C6).
    NodeData data;
    Stat stat{};
    uint64_t generation = 0;
    MonoTime written;  // when the create or last touch was sent
  };

  // The holder node as read from ZooKeeper.
  struct Holder {
    std::string path;
    NodeData data;
    Stat stat{};
  };

  explicit ZkBackend(BackendSettings settings);

  std::string ParentOf(absl::string_view name) const;
  MonoTime Now() const { return session_->clock().Now(); }
  MonoTime CallDeadline() const;
  // Waits for the connection to return, at most until `until`.
  bool Reconnected(MonoTime until);
  bool Connected() { return session_->WaitConnected(MonoTime::InfinitePast()); }
  static bool IsConnectionError(int rc);
  absl::Status EnsureParents(const std::string& parent, MonoTime deadline);

  // zk_acquire.cc
  // A re-entry of the hold the core handed back (C5): one more hold on its
  // node, written into its record. nullopt when that hold is over: the
  // acquisition is then a fresh one.
  std::optional<absl::StatusOr<Grant>> ReenterKnown(const AcquireCall& call,
                                                    ZkHold& held);
  absl::Status CreateOwnNode(const AcquireCall& call, const std::string& parent,
                             const NodeData& data, OwnNode& own,
                             std::optional<std::vector<std::string>>& children);
  // One more hold (C5): the kept lease grows to what is asked; the lease
  // becomes the larger of what remains and what is asked.
  NodeData Reentered(const LocalHold& hold, absl::Duration lease) const;
  absl::StatusOr<Grant> WaitTurn(
      const AcquireCall& call, const std::string& parent, const NodeData& data,
      OwnNode& own, std::optional<std::vector<std::string>> children);
  // Our node is first, and `kept` (kept-lock nodes, zk_layout.h) may keep
  // the lock taken after an earlier release: deletes those that are over
  // (decided on ZooKeeper's clock, as for a predecessor whose lease ran
  // out), else waits for the first live one to end or go (its watch), the
  // deadline, the fallback poll or our node's refresh. OK: look at the
  // queue again. DeadlineExceeded when the deadline passed with it kept.
  // A node named like a kept one whose data is not ours goes to `foreign`:
  // it keeps nothing, and the caller looks past it from then on.
  absl::Status WaitOutKept(const AcquireCall& call, const std::string& parent,
                           const std::vector<std::string>& kept, OwnNode& own,
                           int64_t lease_ms, MonoTime& next_refresh,
                           std::vector<std::string>& foreign);
  // Writes our node again: its lease starts anew (at least `lease_ms`, never
  // less than what remains of it) and the write reads ZooKeeper's clock;
  // `since_ms`, when set, marks the start of a hold. On a version conflict
  // the node is read again and the write made on what it holds now.
  int Touch(OwnNode& own, int64_t lease_ms,
            std::optional<int64_t> since_ms = std::nullopt);
  // Reads our node into `own`: ZNONODE when it is gone, or not ours.
  int ReloadOwn(OwnNode& own, MonoTime deadline);
  // ReenterHolder() with the holder node read now.
  std::optional<absl::StatusOr<Grant>> MaybeReenterHolder(
      const AcquireCall& call, const std::string& holder_path, OwnNode& own);
  // When the holder node, as `read` found it, is the owner's (an owner
  // token held through another client, C6, or an acquisition of ours whose
  // grant never reached the core, C21): re-enters it and gives our queued
  // node up. nullopt when it is not the owner's, or went meanwhile.
  std::optional<absl::StatusOr<Grant>> ReenterHolder(
      const AcquireCall& call, const std::string& holder_path,
      const Reply& read, OwnNode& own);
  // Takes the hold of an acquisition we give up off our node, by versioned
  // writes: deletes the node, or, when another client of the same owner
  // token re-entered it (C6), takes one hold off and leaves it to that
  // client. ZOK once done or gone; else the failed call's rc.
  int TakeOwnHoldOff(OwnNode& own, MonoTime deadline);
  // TakeOwnHoldOff(), left to the background if the connection fails.
  void Abandon(OwnNode& own);
  // The record of a hold just granted, handed to the core in Grant::record.
  std::shared_ptr<ZkHold> NewRecord(absl::string_view name,
                                    absl::string_view owner,
                                    const LocalHold& hold);

  // zk_backend.cc
  absl::StatusOr<std::optional<Holder>> FindHolder(absl::string_view name);
  // The kept-lock nodes of `name` (paths), and the LockInfo of the live one
  // that ends last, if any is live.
  struct Kept {
    std::vector<std::string> paths;
    std::optional<LockInfo> live;
  };
  absl::StatusOr<Kept> FindKept(absl::string_view name);
  // The end of a kept-lock node as read, on ZooKeeper's clock (ms); nullopt
  // for a node that is not one.
  static std::optional<int64_t> KeptEnd(const Reply& read);
  // The multi that releases while keeping (zk_release.cc).
  Call ReleaseKeeping(const std::string& holder_path, int32_t version,
                      const std::string& kept_path, uint64_t token,
                      absl::Duration keep_for);
  bool Expired(const NodeData& data, const Stat& stat) const;
  // What remains of the lease written at `mtime`, estimated (C5).
  int64_t RemainingMs(const NodeData& data, int64_t mtime) const;
  // For a hold lost with its session, the LostError its release and renewal
  // fail with at once, even before a new session is up; else OK.
  static absl::Status LostWithSession(absl::string_view name,
                                      const ZkHold* record);
  // The hold of `owner` on `name`. With a record: its copy, or, once it
  // ended here, its node read again (never another node of the owner's).
  // Without (a hold taken elsewhere, C6): the holder node when `owner` holds
  // it. nullopt when the owner does not hold it (FailedPrecondition for the
  // caller).
  absl::StatusOr<std::optional<LocalHold>> HoldOf(absl::string_view name,
                                                  absl::string_view owner,
                                                  const ZkHold* record);
  // Re-reads the hold's node after a version conflict; false when it is
  // gone or changed owner.
  bool Reload(LocalHold& hold, absl::string_view owner);
  // The hold's node is gone, not the owner's, its lease ran out, or its
  // delete was sent: its record (if any) is believed no more.
  static void Forget(ZkHold* record) {
    if (record != nullptr) record->End();
  }
  void QueueDelete(PendingDelete pending);
  // Whether the node at `path` is queued for deletion or being deleted.
  bool Deleting(absl::string_view path);
  void OnSessionLost(uint64_t generation, const absl::Status& why);
  void RetryPending();
  // Deletes the kept-lock nodes of the namespace whose keep ended a minute
  // or more ago on ZooKeeper's clock: an acquirer deletes the one it waits
  // out, but a name nobody acquires again (a scheduled job's slot) would
  // keep its node, and its container, for ever. Every kept_sweep, from the
  // session thread's tick.
  // `until`: when to stop (the tick's share of the session thread, or the
  // bound Shutdown() gives it); the rest waits for the next sweep.
  void SweepKept(MonoTime until);

  // zk_release.cc
  // Writes `next` to the hold's node with a versioned write and updates
  // `hold` and its record (null for a hold taken elsewhere). On a version
  // conflict (another client re-entered with the same owner token) re-reads
  // `hold` and returns Aborted: the caller recomputes and writes again.
  // FailedPrecondition when the node is gone or has another owner. A write
  // whose reply was lost is checked after a reconnect, so that it is never
  // applied twice.
  absl::Status Write(absl::string_view name, absl::string_view owner,
                     ZkHold* record, LocalHold& hold, const NodeData& next,
                     absl::string_view what);
  // Write() of next(hold), recomputed after each version conflict, at most
  // kWriteRetries times; then Unavailable: the outcome is known (nothing
  // was written) but other clients of the owner token keep writing.
  absl::Status WriteRecomputed(
      absl::string_view name, absl::string_view owner, ZkHold* record,
      LocalHold& hold, absl::FunctionRef<NodeData(const LocalHold&)> next,
      absl::string_view what);
  // After a delete whose reply was lost, a NONODE: whether it was our delete
  // that removed the node (true), or it may have been a successor's.
  bool OurDeleteRan(const LocalHold& hold);
  absl::Status KeptConflicting(absl::string_view name,
                               absl::string_view what) const;

  const BackendSettings settings_;
  const std::string base_;  // <chroot>/dlock/<namespace>
  // What EnsureParents creates above base_: the chroot and /dlock.
  std::vector<std::string> ancestors_;
  WakeupHub hub_;  // keyed by the path a waiter watches
  std::unique_ptr<Session> session_;
  // Random, drawn once per backend: with the client id and attempts_ it
  // names our nodes, so that a lost create finds only its own node even
  // when another process was given the same client id.
  const std::string instance_;
  // "<client id>-<instance>-": what the names of this backend's nodes start
  // with.
  const std::string node_prefix_;
  std::atomic<uint64_t> attempts_{0};

  // Taken before a record's own mutex, never after it; never held while
  // calling the listener.
  absl::Mutex mu_;
  // The records of holds on our sessions, so that each learns when its
  // session ends and the core is told (OnSessionLost). Not a hold table:
  // the core owns the records, nothing is looked up here, and a record the
  // core dropped falls out at the next prune.
  std::vector<std::weak_ptr<ZkHold>> session_holds_ ABSL_GUARDED_BY(mu_);
  size_t prune_at_ ABSL_GUARDED_BY(mu_) = 64;
  std::vector<PendingDelete> pending_ ABSL_GUARDED_BY(mu_);
  // What RetryPending() works on now (taken out of pending_).
  std::vector<PendingDelete> retrying_ ABSL_GUARDED_BY(mu_);
  // SweepKept(): when the next sweep is due, the lock-name nodes the
  // current one has yet to visit, and whether this client kept a lock (its
  // Shutdown() then sweeps too: a cron-style process may be the only
  // client that ever does).
  MonoTime next_sweep_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> sweep_names_ ABSL_GUARDED_BY(mu_);
  bool made_keep_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dlock::zk

#endif  // DLOCK_BACKENDS_ZOOKEEPER_ZK_BACKEND_H_
