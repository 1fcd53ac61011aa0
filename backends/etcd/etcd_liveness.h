// Copyright dlock authors. Holder liveness on etcd (docs/etcd.md): a key per
// client, /dlock/%live/<liveness id>.<generation> (etcd_layout.h), on a
// lease of liveness_ttl that the core's heartbeat keeps alive
// (Backend::RenewLiveness). Each hold's value names the keys of the clients
// it is held through (HoldValue::live); a waiter that finds every one of
// them gone ends the hold (EtcdBackend::TakeOver).
//
// The key lives as long as its lease, and the lease lives at least its TTL
// (liveness_ttl rounded up to whole seconds, or etcd's minimum) after the
// sending of its last answered keepalive. The core believes this client's
// holds only until that sending plus liveness_ttl, less the drift margin
// (C19), so a waiter finds the key gone only after the holder stopped
// believing. A generation whose lease etcd no longer knows is never named
// again: the holds that name it stay free to take over, and the next grant
// begins the next generation.
#ifndef DLOCK_BACKENDS_ETCD_ETCD_LIVENESS_H_
#define DLOCK_BACKENDS_ETCD_ETCD_LIVENESS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dlock/backend/wakeup.h"
#include "dlock/clock.h"
#include "etcd_client.h"
#include "etcd_hold.h"

namespace dlock::etcd {

class ClientLiveness {
 public:
  // This client's liveness key as a grant names it: it lives on etcd at
  // least until `confirmed` plus liveness_ttl.
  struct Record {
    std::string id;
    MonoTime confirmed;
  };

  // `ttl` InfiniteDuration: liveness is off, and holds name no key.
  // `recheck`: how long a key seen live is taken for live while the watch
  // tells no deletion of it (the waiters' fallback poll: watches have had
  // bugs that lose events).
  ClientLiveness(Client& client, WakeupHub& hub, const Clock& clock,
                 std::string liveness_id, absl::Duration ttl,
                 absl::Duration recheck);
  ~ClientLiveness();
  ClientLiveness(const ClientLiveness&) = delete;
  ClientLiveness& operator=(const ClientLiveness&) = delete;

  // The record a grant about to be sent names; kept alive first when half
  // its TTL has gone since it was confirmed, begun when there is none.
  // nullopt when liveness is off.
  absl::StatusOr<std::optional<Record>> ForGrant() ABSL_LOCKS_EXCLUDED(mu_);
  // After a grant sent at `sent` that named `record`: from when the core
  // may count the grant as a refresh of the record (Grant::sent,
  // Backend::RenewLiveness). A keepalive sent now counts from `sent`: one
  // is sent when the record was confirmed more than `slack` before it.
  // InfiniteFuture when liveness is off.
  MonoTime CountsFrom(const std::optional<Record>& record, MonoTime sent,
                      absl::Duration slack) ABSL_LOCKS_EXCLUDED(mu_);
  // Backend::RenewLiveness: a keepalive of the record's lease.
  absl::Status Renew(absl::Duration ttl) ABSL_LOCKS_EXCLUDED(mu_);

  // Which of `ids` (anyone's) still have their key, in one read.
  absl::StatusOr<absl::flat_hash_set<std::string>> LiveAmong(
      const std::vector<std::string>& ids);
  // Wakes the waiters of the lock `name` when the key of one of `ids` is
  // deleted. The first call starts a watch of every liveness key, from
  // `from_revision` on.
  void WakeWhenGone(absl::string_view name, const std::vector<std::string>& ids,
                    int64_t from_revision) ABSL_LOCKS_EXCLUDED(mu_);
  // A waiter's look found the key of the hold's one client live: taken
  // for live, without a look, until the watch tells its deletion or
  // `recheck` passed. Holds of several clients are always looked at.
  void SawLive(const std::vector<std::string>& ids) ABSL_LOCKS_EXCLUDED(mu_);
  bool KnownLive(const std::vector<std::string>& ids) ABSL_LOCKS_EXCLUDED(mu_);
  // Undoes WakeWhenGone once every key of `ids` is gone (their deletions
  // may have come before it).
  void Unwatch(absl::string_view name, const std::vector<std::string>& ids)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Stops the watch and revokes the record's lease: its key goes at once.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Current {
    std::string id;
    LeaseState lease;
  };

  bool off() const { return ttl_ == absl::InfiniteDuration(); }
  // A keepalive of `current`'s lease: when it was sent, once answered;
  // NotFound (and the record is dropped) when etcd no longer knows it.
  absl::StatusOr<MonoTime> KeepAlive(const Current& current,
                                     absl::Duration within)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The next generation: a lease, then the key on it.
  absl::StatusOr<Record> Begin() ABSL_EXCLUSIVE_LOCKS_REQUIRED(begin_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  void OnWatch(const WatchUpdate& update) ABSL_LOCKS_EXCLUDED(mu_);

  Client& client_;
  WakeupHub& hub_;
  const Clock& clock_;
  const std::string liveness_id_;
  const absl::Duration ttl_;
  const absl::Duration recheck_;

  // Held while a generation begins, so that threads never begin two.
  absl::Mutex begin_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::Mutex mu_;
  std::optional<Current> current_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // Lock names waited on, by the liveness id whose deletion wakes them.
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> waits_
      ABSL_GUARDED_BY(mu_);
  // SawLive: when each was seen live. Only while the watch runs.
  absl::flat_hash_map<std::string, MonoTime> seen_live_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Watch> watch_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dlock::etcd

#endif  // DLOCK_BACKENDS_ETCD_ETCD_LIVENESS_H_
