// Copyright dlock authors. The zk:// backend's queue recipe: Curator's
// InterProcessMutex (LockInternals.attemptLock and internalLockLoop) as dlock
// runs it. An acquisition creates an EPHEMERAL_SEQUENTIAL node under the
// lock-name node, lists the queue, asks the driver (zk_driver.h) where its
// node stands, and acts: takes the lock when first, waits out a lock kept
// after its release, watches only its predecessor otherwise (no herd), or
// queues again when its node is gone. What the contract adds on top: a lease
// on every node, decided on ZooKeeper's clock (C2), re-entry of an owner
// token's hold through another client (C6), and an acquisition of ours whose
// grant was lost re-entered rather than waited out (C21).
#ifndef DLOCK_BACKENDS_ZOOKEEPER_ZK_QUEUE_H_
#define DLOCK_BACKENDS_ZOOKEEPER_ZK_QUEUE_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"
#include "zk_driver.h"
#include "zk_hold.h"
#include "zk_janitor.h"
#include "zk_writer.h"

namespace dlock::zk {

// DeadlineExceeded: the object is held by others (the core tells a single
// attempt from an expired wait).
absl::Status HeldByAnother(absl::string_view name,
                           ObjectKind kind = ObjectKind::kLock);

class LockQueue {
 public:
  struct Settings {
    // "<client id>-<instance>-": what our nodes' names start with. The
    // instance is random per backend, so that a lost create finds only its
    // own node even when another process was given the same client id.
    std::string node_prefix;
    std::string base;  // <chroot>/dlock/<namespace>
    // What EnsureParents() creates above base: the chroot and /dlock.
    std::vector<std::string> ancestors;
    absl::Duration fallback_poll;
  };

  LockQueue(NodeWriter& writer, Janitor& janitor, SessionHolds& holds,
            WakeupHub& hub, Settings settings)
      : writer_(writer),
        session_(writer.session()),
        janitor_(janitor),
        holds_(holds),
        hub_(hub),
        settings_(std::move(settings)) {}

  // A fresh acquisition of `call.name`, whose lock-name node is `parent`:
  // waits in its queue until first, `call.deadline`, or cancellation.
  absl::StatusOr<Grant> Acquire(const AcquireCall& call,
                                const std::string& parent);

 private:
  // One acquisition waiting for its turn: the state WaitTurn() runs on.
  struct Turn {
    const AcquireCall& call;
    std::string parent;
    NodeData data;  // what our node holds when created
    // Before "lock-" in our node's name: a semaphore's PermitsTag, else "".
    std::string tag;
    absl::Duration lease;
    bool token_owner = false;
    OwnNode own;
    // The queue as listed with our create, or nothing: list it.
    std::optional<std::vector<std::string>> children;
    // Whether `children` came from a listing that set a child watch.
    bool watched = false;
    // Whether our node was ever behind another: then it becomes first
    // while we are not looking, and must be written again when we see it
    // first.
    bool waited = false;
    bool checked_holder = false;
    // A semaphore's node that cannot admit the waiters ahead with itself
    // (their nodes refuse our writes: another identity's ACL): admitted only
    // once the nodes ahead admitted themselves.
    bool admit_alone = false;
    // Whether our node may have changed since we last read or wrote it.
    bool reread_own = false;
    // Nodes named like kept-lock nodes whose data is not ours: they keep
    // nothing, and are looked past from then on.
    std::vector<std::string> foreign_kept;
    MonoTime next_refresh;
    // When the latest read that found our semaphore node waiting was sent:
    // admitted after it, by a node behind ours, its lease on ZooKeeper
    // started no earlier.
    MonoTime seen_waiting = MonoTime::InfinitePast();
  };
  // What a step of the wait decided: nothing (look at the queue again), or
  // the acquisition's end.
  using Next = std::optional<absl::StatusOr<Grant>>;

  // Lists, asks the driver, and runs the step for where our node stands,
  // until one ends the acquisition.
  absl::StatusOr<Grant> WaitTurn(Turn& t);
  // The steps, one per QueueView::Position.
  Next Requeue(Turn& t);
  Next WaitOutKept(Turn& t, const std::vector<std::string>& kept);
  Next Take(Turn& t);
  Next WaitBehind(Turn& t, const QueueView& view);
  // Our node holds now: the hold's record and grant.
  Next Granted(Turn& t);
  // The grant of a hold of `hold`'s node, with a new record (and a
  // semaphore node's slots).
  Grant GrantOf(const AcquireCall& call, const LocalHold& hold);
  // Every wait's next look at the queue: the listing of our create, or a
  // new one (setting a child watch with `watch`), in `children`. An end
  // when cancelled or the listing failed; nothing at all after a
  // reconnect (list again).
  Next NextListing(Turn& t, bool watch,
                   std::optional<std::vector<std::string>>& children);
  // Their parts. With `watch`, the listing sets a child watch.
  Next List(Turn& t, bool watch = false);
  // One kept-lock node: waited out (`look_again`), or over or gone (the
  // next one).
  Next WaitOutOneKept(Turn& t, const std::string& child, bool& look_again);
  Next AdoptOwnHolder(Turn& t, const QueueView& view,
                      const std::string& predecessor, const Reply& read);
  // A node (a predecessor, a kept-lock node) whose end, as read, looks
  // passed: deleted only if it has passed on ZooKeeper's clock.
  enum class Over { kNo, kDeleted, kOwnNodeGone };
  Over DeleteIfOver(Turn& t, const std::string& path, const Reply& read,
                    int64_t end);
  Next Sleep(Turn& t, WakeupHub::Waiter& waiter, int64_t until_ms);
  Next RefreshIfDue(Turn& t);
  // After a failed call: nothing when the connection came back in time
  // (look again), else the acquisition's end with the error.
  Next ReconnectOrFail(Turn& t, int rc, absl::string_view what);
  // Gives our node up and ends the acquisition with `status`.
  Next Fail(Turn& t, absl::Status status);

  // zk_admission.cc: a semaphore's queue (C22). A node is admitted when
  // the permits ahead plus its own fit in N, together with the waiters
  // ahead (one multi), so admissions stay in queue order; a waiter behind a
  // waiter watches it, the head waiter watches the queue and removes
  // holders whose lease ended.
  absl::StatusOr<Grant> WaitAdmission(Turn& t);
  // One look at the queue, listed in `children`: the acquisition's end, or
  // nothing (look again).
  Next Admission(Turn& t, WakeupHub::Waiter& waiter,
                 std::vector<std::string> children);
  // Admitted: our node and every waiting node ahead, each given the lowest
  // slots no node before it holds, in one multi; our write starts our
  // lease.
  Next Admit(Turn& t, const std::vector<std::string>& queue,
             const std::vector<std::string>& paths,
             const std::vector<Reply>& ahead);
  // The nodes at `paths` (ahead of ours) into `ahead`, and ours into t.own;
  // the nodes gone meanwhile leave `paths`.
  Next ReadQueue(Turn& t, std::vector<std::string>& paths,
                 std::vector<Reply>& ahead);
  // The multi of Admit(); a conflict reads `queue` (the listing) again.
  Next WriteAdmission(Turn& t, const std::vector<std::string>& queue,
                      const std::vector<Session::VersionedWrite>& writes,
                      NodeData next);
  // Our node was admitted by a node behind it: the hold counts from our
  // latest read that found it waiting (its lease started later), or, when
  // that is a third of the lease ago, from a write of ours (C2, C19).
  Next AdmittedByAnother(Turn& t);
  // The head waiter, no room: deletes the holders ahead whose lease is
  // over, else sleeps until the first lease ends or the queue changes.
  Next WaitForRoom(Turn& t, WakeupHub::Waiter& waiter,
                   const std::vector<std::string>& paths,
                   const std::vector<Reply>& ahead);
  // When a node ahead is the owner's own grant (an owner token's through
  // another client, C6, or ours whose reply was lost, C21): re-enters it,
  // or refuses other permits (kPermitsMismatch).
  Next ReenterOwnGrant(Turn& t, const std::vector<std::string>& paths,
                       const std::vector<Reply>& ahead);

  // zk_readers.cc: a reader in the lock's own queue (C23). It holds when
  // every write node ahead of it is its owner's own; otherwise it watches
  // the last other write node ahead. Writers take the lock's recipe
  // (WaitTurn): first in the queue, readers included, is theirs.
  absl::StatusOr<Grant> WaitRead(Turn& t);
  Next ReadTurn(Turn& t, WakeupHub::Waiter& waiter,
                const std::vector<std::string>& queue);
  // A writer whose owner token does not hold the lock but reads it through
  // another client (one of `reads`, the read nodes ahead) would wait for
  // itself: refused with kUpgradeRefused at its first look at the queue,
  // its node given up (the core refuses its own readers before sending).
  Next RefuseUpgrade(Turn& t, const std::vector<std::string>& reads);

  // Creates our node (and the lock-name node's parents if missing), finding
  // it again if the create's reply was lost (Curator's protection).
  absl::Status CreateOwnNode(Turn& t);
  // After a create whose reply was lost: our node with `prefix`, adopted;
  // false when there is none (create again).
  absl::StatusOr<bool> FindLostCreate(Turn& t, const std::string& prefix,
                                      uint64_t generation);
  absl::Status EnsureParents(const std::string& parent, MonoTime deadline);

  // ReenterHolder() with the holder node read now.
  Next MaybeReenterHolder(const AcquireCall& call,
                          const std::string& holder_path, OwnNode& own);
  // When the holder node, as `read` found it, is the owner's (an owner token
  // held through another client, C6, or an acquisition of ours whose grant
  // never reached the core, C21): re-enters it and gives our queued node
  // up. Nothing when it is not the owner's, or went meanwhile.
  Next ReenterHolder(const AcquireCall& call, const std::string& holder_path,
                     const Reply& read, OwnNode& own);

  NodeWriter& writer_;
  Session& session_;
  Janitor& janitor_;
  SessionHolds& holds_;
  WakeupHub& hub_;  // keyed by the path a waiter watches
  const Settings settings_;
  std::atomic<uint64_t> attempts_{0};
};

}  // namespace dlock::zk

#endif  // DLOCK_BACKENDS_ZOOKEEPER_ZK_QUEUE_H_
