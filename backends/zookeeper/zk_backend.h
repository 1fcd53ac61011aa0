// Copyright dlock authors. The zk:// backend: Curator's InterProcessMutex
// recipe (an EPHEMERAL_SEQUENTIAL node per acquisition, each waiter watching
// only its predecessor) plus what the lock contract adds on top: a lease on
// ZooKeeper's clock, re-entry and owner tokens in the node's data, fencing
// tokens from czxid. docs/zookeeper.md explains the layout and guarantees.
//
// The backend is a facade over parts with one job each:
//   Session      (zk_session.h)  the C client's handle, calls, the session's
//                                life and how long its holds are believable;
//   LockQueue    (zk_queue.h)    the queue recipe an acquisition waits in,
//                                over the driver (zk_driver.h) that reads
//                                the queue;
//   NodeWriter   (zk_writer.h)   every versioned write and delete of a node;
//   Janitor      (zk_janitor.h)  deletes left for later, kept-node sweeps;
//   SessionHolds (zk_hold.h)     which holds live on which session.
// This file's class does re-entry of a known hold, release, renewal
// (zk_release.cc), introspection and force unlock (zk_inspect.cc).
#ifndef DLOCK_BACKENDS_ZOOKEEPER_ZK_BACKEND_H_
#define DLOCK_BACKENDS_ZOOKEEPER_ZK_BACKEND_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"
#include "zk_hold.h"
#include "zk_janitor.h"
#include "zk_layout.h"
#include "zk_queue.h"
#include "zk_session.h"
#include "zk_writer.h"

namespace dlock::zk {

struct BackendSettings {
  Session::Options session;
  std::string chroot;  // "" or "/a/b"
  std::string lock_namespace;
  std::string client_id;
  absl::Duration fallback_poll;
  // How often the namespace is swept for kept-lock nodes long over
  // (Janitor::SweepKept).
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
  // Elections (C24): the mutex recipe on the election's own parent
  // (zk_layout.h), the value in the node's data. Semaphores (C22): the
  // admission recipe (zk_admission.cc). zk_objects.cc.
  absl::Status Proclaim(const ProclaimCall& call) override;
  std::unique_ptr<ObjectWatch> WatchObject(ObjectKind kind,
                                           absl::string_view name) override;
  absl::StatusOr<ObjectInfo> InspectObject(ObjectKind kind,
                                           absl::string_view name) override;
  absl::StatusOr<std::vector<ObjectInfo>> ListObjects(
      ObjectKind kind, absl::string_view prefix) override;
  absl::Status ForceUnlockObject(
      ObjectKind kind, absl::string_view name,
      std::optional<uint64_t> fencing_token) override;
  // mntr's zk_approximate_data_size from the server the session is on.
  absl::StatusOr<ServerMemory> ServerMemoryUse() override;
  void Shutdown() override;

 private:
  // The holder node as read from ZooKeeper.
  struct Holder {
    std::string path;
    NodeData data;
    Stat stat{};
  };
  // The kept-lock nodes of a name (paths), and the LockInfo of the live one
  // that ends last, if any is live.
  struct Kept {
    std::vector<std::string> paths;
    std::optional<LockInfo> live;
  };

  explicit ZkBackend(BackendSettings settings);
  // Opens the session and makes the parts that work on it.
  absl::Status Start();

  // The parent of the queue of object `name` of `kind`.
  std::string ParentOf(ObjectKind kind, absl::string_view name) const;
  std::string ParentOf(absl::string_view lock_name) const {
    return ParentOf(ObjectKind::kLock, lock_name);
  }
  MonoTime Now() const { return writer_->Now(); }

  // zk_release.cc
  // A re-entry of the hold the core handed back (C5): one more hold on its
  // node, written into its record. Nothing when that hold is over: the
  // acquisition is then a fresh one.
  std::optional<absl::StatusOr<Grant>> ReenterKnown(const AcquireCall& call,
                                                    ZkHold& held);
  // The hold of `owner` on `name`. With a record: its copy, or, once it
  // ended here, its node read again (never another node of the owner's).
  // Without (a hold taken elsewhere, C6): the holder node when `owner` holds
  // it. Nothing when the owner does not hold it (GONE for the caller).
  absl::StatusOr<std::optional<LocalHold>> HoldOf(absl::string_view name,
                                                  absl::string_view owner,
                                                  const ZkHold* record,
                                                  const HoldShape& shape);
  // For a hold lost with its session, the LostError its release and renewal
  // fail with at once, even before a new session is up; else OK.
  static absl::Status LostWithSession(absl::string_view name,
                                      const ZkHold* record);
  // A hold whose lease ran out by the time of a `what` (release, renewal):
  // forgotten, its node left to the janitor; the status to answer.
  absl::Status LeaseRanOut(absl::string_view name, ZkHold* record,
                           const LocalHold& hold, absl::string_view what);
  // One release in progress: what it asks, and what it sent.
  struct Releasing {
    const ReleaseCall& call;
    ZkHold* record;
    LocalHold hold;
    // Keeping the lock (ReleaseCall::keep_for): the delete goes in one
    // multi with the create of a kept-lock node named after this hold's
    // token, so a kept-lock node of this hold exists exactly when the
    // release ran (zk_layout.h).
    bool keep = false;
    MonoTime keep_until;
    std::string kept_path;
    bool delete_sent = false;  // a delete went out whose reply was lost
  };
  // Takes the holds off, by versioned writes that conflicts repeat.
  absl::StatusOr<int64_t> TakeHoldsOff(Releasing& r);
  // The last hold: deletes the node (or keeps the lock). Nothing when the
  // node must be read again or the connection came back: try again.
  absl::StatusOr<std::optional<int64_t>> DeleteHold(Releasing& r);
  // After the delete of DeleteHold() found no node: whether ours ran.
  absl::StatusOr<int64_t> DeletedMeanwhile(Releasing& r);

  // zk_inspect.cc
  // The first node of the queue of an object of `kind`. With `watch`, the
  // listing and the read set the watches an ObjectWatch wakes on (a child
  // more or less, the first node's data), or, with no queue at all, a
  // watch for its parent's creation.
  absl::StatusOr<std::optional<Holder>> FindHolder(
      absl::string_view name, ObjectKind kind = ObjectKind::kLock,
      bool watch = false);
  absl::StatusOr<Kept> FindKept(absl::string_view name);
  // Whether the first node of a queue (FindHolder) holds as a writer: not
  // a lock's reader, its lease running.
  bool WriterHolds(const std::optional<Holder>& first) const;
  LockInfo Describe(absl::string_view name, const Holder& holder) const;
  // Every node of the queue of an object of `kind`, in order, as read now
  // (nodes gone meanwhile left out; nothing when there is no queue).
  absl::StatusOr<std::vector<Holder>> ReadQueue(ObjectKind kind,
                                                absl::string_view name);
  // The node of `owner` (as stored) that holds in the queue of an object
  // of `kind` besides the first one (a semaphore's admitted node, a lock's
  // read node), if any and its lease runs.
  absl::StatusOr<std::optional<Holder>> FindGrant(ObjectKind kind,
                                                  absl::string_view name,
                                                  absl::string_view owner);
  // The nodes of `queue` (an object of `kind`) that hold now, their lease
  // running: a semaphore's admitted nodes; a lock's first node if it is a
  // writer's, and its readers with no other owner's write node ahead.
  std::vector<Holder> Holding(ObjectKind kind, std::vector<Holder> queue) const;
  // A semaphore's holders and N, or a lock's writer and readers, as read
  // now (C11).
  absl::StatusOr<ObjectInfo> InspectHolding(ObjectKind kind,
                                            absl::string_view name);
  // Deletes the holding nodes, or only the one whose token is
  // `fencing_token` (TokenMismatchError when none is).
  absl::Status ForceUnlockHolding(ObjectKind kind, absl::string_view name,
                                  std::optional<uint64_t> fencing_token);
  // Deletes the first node of an object's queue (C12), only if it carries
  // `fencing_token` when one is given (TokenMismatchError otherwise); its
  // successor's watch wakes it.
  absl::Status DeleteHolder(ObjectKind kind, absl::string_view name,
                            std::optional<uint64_t> fencing_token);
  // The names of the objects of `kind` under the namespace that start with
  // `prefix`, sorted.
  absl::StatusOr<std::vector<std::string>> NamesOf(ObjectKind kind,
                                                   absl::string_view prefix);

  // The session ended: its holds are lost, told to the core, and their
  // nodes left to the janitor (should the session live on after all).
  void OnSessionLost(uint64_t generation, const absl::Status& why);

  const BackendSettings settings_;
  const std::string base_;  // <chroot>/dlock/<namespace>
  WakeupHub hub_;           // keyed by the path a waiter watches
  SessionHolds holds_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<NodeWriter> writer_;
  std::unique_ptr<Janitor> janitor_;
  std::unique_ptr<LockQueue> queue_;
};

}  // namespace dlock::zk

#endif  // DLOCK_BACKENDS_ZOOKEEPER_ZK_BACKEND_H_
