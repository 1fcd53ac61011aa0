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
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/hold_key.h"
#include "dlock/backend/wakeup.h"
#include "zk_layout.h"
#include "zk_session.h"

namespace dlock::zk {

struct BackendSettings {
  Session::Options session;
  std::string chroot;  // "" or "/a/b"
  std::string lock_namespace;
  std::string client_id;
  absl::Duration fallback_poll;
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
  void Shutdown() override;

 private:
  // Versioned writes that lost a race are tried again this many times.
  static constexpr int kWriteRetries = 5;

  // A hold this client took or re-entered: the holder node as last written.
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

  // A node to delete once the connection allows: a release whose delete was
  // not confirmed, a hold presumed lost (at `version`, so that a node that
  // changed since, re-entered by another client of the same owner token,
  // stays). With `owner` set, a node of an acquisition we gave up (an
  // abandoned wait, a create whose reply was lost): its hold is taken off
  // as TakeOwnHoldOff() does. With `prefix` set, every child of `path` whose
  // name starts with it (a create whose reply was lost).
  struct PendingDelete {
    std::string path;
    std::string prefix;
    int32_t version = -1;
    std::string owner;
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
  std::optional<absl::StatusOr<Grant>> ReenterKnown(const AcquireCall& call);
  absl::Status CreateOwnNode(const AcquireCall& call, const std::string& parent,
                             const NodeData& data, OwnNode& own,
                             std::optional<std::vector<std::string>>& children);
  // One more hold (C5): the kept lease grows to what is asked; the lease
  // becomes the larger of what remains and what is asked.
  NodeData Reentered(const LocalHold& hold, absl::Duration lease) const;
  absl::StatusOr<Grant> WaitTurn(
      const AcquireCall& call, const std::string& parent, const NodeData& data,
      OwnNode& own, std::optional<std::vector<std::string>> children);
  // Writes our node again: its lease starts anew (at least `lease_ms`, never
  // less than what remains of it) and the write reads ZooKeeper's clock;
  // `since_ms`, when set, marks the start of a hold. On a version conflict
  // the node is read again and the write made on what it holds now.
  int Touch(OwnNode& own, int64_t lease_ms,
            std::optional<int64_t> since_ms = std::nullopt);
  // Reads our node into `own`: ZNONODE when it is gone, or not ours.
  int ReloadOwn(OwnNode& own, MonoTime deadline);
  std::optional<absl::StatusOr<Grant>> MaybeReenterHolder(
      const AcquireCall& call, const std::string& holder_path, OwnNode& own);
  // Takes the hold of an acquisition we give up off our node, by versioned
  // writes: deletes the node, or, when another client of the same owner
  // token re-entered it (C6), takes one hold off and leaves it to that
  // client. ZOK once done or gone; else the failed call's rc.
  int TakeOwnHoldOff(OwnNode& own, MonoTime deadline);
  // TakeOwnHoldOff(), left to the background if the connection fails.
  void Abandon(OwnNode& own);
  void Record(absl::string_view name, absl::string_view owner, LocalHold hold);

  // zk_backend.cc
  absl::StatusOr<std::optional<Holder>> FindHolder(absl::string_view name);
  bool Expired(const NodeData& data, const Stat& stat) const;
  // What remains of the lease written at `mtime`, estimated (C5).
  int64_t RemainingMs(const NodeData& data, int64_t mtime) const;
  // The hold of `owner` on `name`: our record, else the holder node when
  // `owner` holds it (explicit owner tokens from other clients). nullopt
  // when the owner does not hold it (FailedPrecondition for the caller).
  absl::StatusOr<std::optional<LocalHold>> HoldOf(absl::string_view name,
                                                  absl::string_view owner);
  // Re-reads the hold's node after a version conflict; false when it is
  // gone or changed owner.
  bool Reload(LocalHold& hold, absl::string_view owner);
  void Forget(absl::string_view name, absl::string_view owner,
              const std::string& path);
  // The reason a hold was lost with its session, if it was; `consume`
  // clears it (a release, a new acquisition).
  std::optional<absl::Status> LostWithSession(absl::string_view name,
                                              absl::string_view owner,
                                              bool consume);
  void QueueDelete(PendingDelete pending);
  void OnSessionLost(uint64_t generation, const absl::Status& why);
  void RetryPending();

  // zk_release.cc
  // Writes `next` to the hold's node with a versioned write and updates
  // `hold` and our record. On a version conflict (another client re-entered
  // with the same owner token) re-reads `hold` and returns Aborted: the
  // caller recomputes and writes again. FailedPrecondition when the node is
  // gone or has another owner. A write whose reply was lost is checked
  // after a reconnect, so that it is never applied twice.
  absl::Status Write(absl::string_view name, absl::string_view owner,
                     LocalHold& hold, const NodeData& next,
                     absl::string_view what);
  // After a delete whose reply was lost, a NONODE: whether it was our delete
  // that removed the node (true), or it may have been a successor's.
  bool OurDeleteRan(const LocalHold& hold);

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
  std::atomic<uint64_t> attempts_{0};

  absl::Mutex mu_;
  HoldMap<LocalHold> holds_ ABSL_GUARDED_BY(mu_);
  // Holds lost with a session, by why: their release and renewal fail
  // with FailedPrecondition at once, even before a new session is up.
  HoldMap<absl::Status> lost_ ABSL_GUARDED_BY(mu_);
  std::vector<PendingDelete> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dlock::zk

#endif  // DLOCK_BACKENDS_ZOOKEEPER_ZK_BACKEND_H_
