// Copyright dlock authors. A client's spare leases (issue 25): leases
// granted ahead of the acquisitions that will put a key on them, so that an
// uncontended acquire sends one write through Raft (its create) where it
// would send two (a grant, then the create). A spare carries no key: granted
// ahead, or given back by a release that deleted its hold's key (so that an
// uncontended pair is two writes, the create and the delete, where it would
// be three with a revocation). It becomes a hold's own lease when an
// acquisition takes it (etcd_hold.h), and is never handed out twice.
//
// Demand-driven: nothing is granted ahead for a lease length until it is
// acquired again within the demand window of its previous acquisition, so a
// client that acquires once grants one lease, its hold's. From then on one
// thread of the pool's own keeps spares of that length ready: one, and one
// more (up to a bound) each time an acquisition finds none. Spares are kept
// fresh (a keepalive before they get older than their acquisitions accept,
// so that the core counts a hold on one nearly from its acquisition; a spare
// stays takeable while its keepalive is under way) while their length is
// still acquired, and revoked once it no longer is, and at Shutdown(). A grant
// that fails leaves no spare: the acquisition grants one itself, as without a
// pool.
#ifndef DLOCK_BACKENDS_ETCD_ETCD_SPARES_H_
#define DLOCK_BACKENDS_ETCD_ETCD_SPARES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dlock/clock.h"
#include "etcd_client.h"
#include "etcd_hold.h"

namespace dlock::etcd {

class SpareLeases {
 public:
  struct Limits {
    // Spares of one lease length: as many as threads that acquire and
    // release back to back, whose holds' leases come back to them.
    int per_length = 16;
    int total = 32;  // of every length together
    // A length acquired again within this of its previous acquisition is
    // in demand; spares of a length not acquired for this long are revoked.
    absl::Duration demand_window = absl::Seconds(5);
    // Acquisitions that accept spares only younger than this get none: the
    // thread would keep each alive more often than every half of it.
    absl::Duration min_age = absl::Milliseconds(100);
  };

  SpareLeases(Client& client, const Clock& clock, Limits limits);
  ~SpareLeases();  // Shutdown()
  SpareLeases(const SpareLeases&) = delete;
  SpareLeases& operator=(const SpareLeases&) = delete;

  // A spare for a hold of `lease`, if one is ready: last confirmed less than
  // `max_age` ago, or else with more than half its TTL left (the hold then
  // counts from a keepalive after its grant); records the demand either
  // way.
  std::optional<LeaseState> Take(absl::Duration lease, absl::Duration max_age)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A spare an acquisition took and put no key on (no create naming it was
  // sent without its answer), or the lease of a hold whose key its release
  // deleted: kept when its length is in demand, there is room and it is
  // fresh enough for the acquisitions, else revoked.
  void Return(absl::Duration lease, const LeaseState& spare)
      ABSL_LOCKS_EXCLUDED(mu_);
  // How many spares of `lease` are ready now: for tests and gauges.
  int ReadyCount(absl::Duration lease) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the pool's thread and revokes every spare. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The spares of one lease length (etcd's whole seconds), and its demand.
  struct Length {
    absl::Duration lease;  // as acquisitions ask it
    MonoTime last_asked = MonoTime::InfinitePast();
    absl::Duration max_age;
    int wanted = 0;                 // how many spares to keep ready
    int busy = 0;                   // being granted by the thread
    std::vector<LeaseState> ready;  // the freshest last
  };
  // The thread's next call.
  struct Job {
    enum class Kind { kGrant, kRefresh, kRevoke } kind;
    int64_t length_key = 0;
    absl::Duration lease;
    LeaseState spare;
  };

  static int64_t KeyOf(absl::Duration lease);
  static MonoTime Confirmed(const LeaseState& spare) {
    return spare.alive_until - spare.ttl;
  }
  // More than half its TTL left: a create sent on it now finds it.
  static bool LongAlive(const LeaseState& spare, MonoTime now) {
    return spare.alive_until - now > spare.ttl / 2;
  }
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for the next job; nullopt once shut down.
  std::optional<Job> NextJob() ABSL_LOCKS_EXCLUDED(mu_);
  // A job due now, or when to look again (`next`).
  std::optional<Job> DueJob(MonoTime now, MonoTime& next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Do(const Job& job) ABSL_LOCKS_EXCLUDED(mu_);
  // The ends of a grant and of a keepalive of a ready spare.
  void Granted(const Job& job, const absl::StatusOr<LeaseState>& spare)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Refreshed(const Job& job, const absl::StatusOr<LeaseState>& fresh)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Files `spare` among the ready ones of `length` if it is wanted there.
  bool Keep(Length& length, const LeaseState& spare, MonoTime now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int Pooled() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void StartThread() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Client& client_;
  const Clock& clock_;
  const Limits limits_;

  absl::Mutex mu_;
  ClockCondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // When the waiting thread looks again (InfinitePast: it is not waiting).
  MonoTime wake_at_ ABSL_GUARDED_BY(mu_) = MonoTime::InfinitePast();
  std::map<int64_t, Length> lengths_ ABSL_GUARDED_BY(mu_);
  // Started on the first demand, so that a one-shot client has none.
  std::thread thread_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dlock::etcd

#endif  // DLOCK_BACKENDS_ETCD_ETCD_SPARES_H_
