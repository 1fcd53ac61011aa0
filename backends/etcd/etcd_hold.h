// Copyright dlock authors. What the etcd:// backend keeps of one hold: the
// create revision of its key (its generation and fencing token) and the
// lease it lives on, handed to the core as the hold's HoldRecord and back
// on every later call about it. The backend has no table of holds.
#ifndef DLOCK_BACKENDS_ETCD_ETCD_HOLD_H_
#define DLOCK_BACKENDS_ETCD_ETCD_HOLD_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dlock/backend/backend.h"
#include "dlock/clock.h"

namespace dlock::etcd {

// One etcd lease as this client knows it.
struct LeaseState {
  int64_t id = 0;
  absl::Duration ttl;  // as etcd granted it: each keepalive restores it
  // It lives at least until here: the send of its grant or latest answered
  // keepalive plus the TTL etcd gave it.
  MonoTime alive_until = MonoTime::InfinitePast();
};

// A hold's key lives on one lease, which carries that key alone and only
// for this generation of it while the hold lasts: so revoking the lease
// deletes exactly this hold, and a lease etcd no longer knows means the
// hold is gone or was moved to a longer lease by a re-entry (read the key
// then). A lease carries one key at a time: the release of a hold this
// client alone knows (untouched since its create) deletes the key and
// gives the lease, which carries nothing then, back to the client's spares
// (etcd_spares.h) for a later hold. So a lease read with the key before
// may carry another hold since: an end of a hold another call read deletes
// the key first, guarded by its revisions, and revokes the lease only once
// that delete succeeded (EtcdBackend::EndHold); every other end revokes it.
// A lease may then outlive its key (that revocation failed, or the key was
// deleted by hand): a renewal reads the key too.
class EtcdHold final : public HoldRecord {
 public:
  // `token`: the hold's fencing token when not its key's create revision
  // (a writer's own read carries the writer's, C23); 0: that revision.
  EtcdHold(int64_t create_revision, const LeaseState& lease, uint64_t token = 0)
      : create_revision_(create_revision),
        token_(token != 0 ? token : static_cast<uint64_t>(create_revision)),
        lease_(lease) {}

  // Only records this backend made come back to it.
  static EtcdHold* Of(HoldRecord* record) {
    return static_cast<EtcdHold*>(record);
  }

  int64_t create_revision() const { return create_revision_; }
  uint64_t fencing_token() const { return token_; }
  LeaseState lease() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return lease_;
  }
  // A grant, keepalive or move of the hold's lease was confirmed.
  void Update(const LeaseState& lease) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (lease.id != lease_.id || lease.alive_until > lease_.alive_until) {
      lease_ = lease;
    }
  }

 private:
  const int64_t create_revision_;
  const uint64_t token_;
  mutable absl::Mutex mu_;
  LeaseState lease_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dlock::etcd

#endif  // DLOCK_BACKENDS_ETCD_ETCD_HOLD_H_
