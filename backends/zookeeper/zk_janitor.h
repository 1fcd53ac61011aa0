// Copyright dlock authors. The zk:// backend's janitor: the deletes that
// could not be made when they were due (a release whose reply was lost, an
// acquisition given up while disconnected, a hold presumed lost), retried
// from the session thread's tick until ZooKeeper answers (Curator's
// guaranteed delete), and the sweep of kept-lock nodes long over.
#ifndef DLOCK_BACKENDS_ZOOKEEPER_ZK_JANITOR_H_
#define DLOCK_BACKENDS_ZOOKEEPER_ZK_JANITOR_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dlock/clock.h"
#include "zk_writer.h"

namespace dlock::zk {

// A node to delete once the connection allows: a release whose delete was
// not confirmed, a hold presumed lost (at `version`, so that a node that
// changed since, re-entered by another client of the same owner token,
// stays). With `owner` set, a node of an acquisition we gave up (an
// abandoned wait, a create whose reply was lost): its hold is taken off as
// NodeWriter::TakeOwnHoldOff() does. With `prefix` set, every child of
// `path` whose name starts with it (a create whose reply was lost). With
// `kept_path` set, a release that keeps the lock (ReleaseCall::keep_for):
// the delete goes with the kept-lock node's create, keeping the lock until
// `keep_until` here (nothing if that has passed).
struct PendingDelete {
  std::string path;
  std::string prefix;
  int32_t version = -1;
  std::string owner;
  std::string kept_path;
  uint64_t kept_token = 0;
  MonoTime keep_until = MonoTime::InfinitePast();
};

class Janitor {
 public:
  // `base` is the namespace's node (<chroot>/dlock/<namespace>); kept-lock
  // nodes under it are swept every `kept_sweep`.
  Janitor(NodeWriter& writer, std::string base, absl::Duration kept_sweep);

  void Queue(PendingDelete pending) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the node at `path` is queued for deletion or being deleted.
  bool Deleting(absl::string_view path) ABSL_LOCKS_EXCLUDED(mu_);
  // Gives up our queued node: TakeOwnHoldOff(), left to the background if
  // the connection fails.
  void Abandon(OwnNode& own);
  // This client kept a lock after its release: its Shutdown() sweeps too (a
  // cron-style process may be the only client that ever does).
  void NoteKeep() ABSL_LOCKS_EXCLUDED(mu_);

  // From the session thread's tick: the deletes that are due, then a share
  // of the sweep.
  void RetryPending() ABSL_LOCKS_EXCLUDED(mu_);
  // Deletes the kept-lock nodes of the namespace whose keep ended a while
  // ago on ZooKeeper's clock: an acquirer deletes the one it waits out, but
  // a name nobody acquires again (a scheduled job's slot) would keep its
  // node, and its container, for ever. Every kept_sweep; `until` bounds
  // this call's share, the rest waits for the next one.
  void SweepKept(MonoTime until) ABSL_LOCKS_EXCLUDED(mu_);
  // Before the session closes: one last sweep if this client kept a lock.
  void SweepBeforeShutdown() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Gives up the acquisition's node at `path` of `owner`; the C rc.
  int GiveUpOwn(const std::string& path, const std::string& owner,
                MonoTime deadline);
  // One pending delete; false when the connection failed (try again).
  bool Retry(const PendingDelete& p, MonoTime deadline);
  // Deletes the kept-lock nodes of one lock name that are long over.
  void SweepName(const std::string& name, MonoTime until);

  NodeWriter& writer_;
  Session& session_;
  const std::string base_;
  const absl::Duration kept_sweep_;

  absl::Mutex mu_;
  std::vector<PendingDelete> pending_ ABSL_GUARDED_BY(mu_);
  // What RetryPending() works on now (taken out of pending_).
  std::vector<PendingDelete> retrying_ ABSL_GUARDED_BY(mu_);
  // When the next sweep is due, and the lock-name nodes the current one has
  // yet to visit.
  MonoTime next_sweep_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> sweep_names_ ABSL_GUARDED_BY(mu_);
  bool made_keep_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dlock::zk

#endif  // DLOCK_BACKENDS_ZOOKEEPER_ZK_JANITOR_H_
