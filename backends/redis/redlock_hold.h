// Copyright dlock authors. What a Redlock client knows of one hold across
// the masters, and of its liveness key on each master: from these it
// computes until when no quorum of masters can grant the hold's lock to
// another owner (C19). docs/redis.md, "Redlock and holder liveness", has the
// argument.
#ifndef DLOCK_BACKENDS_REDIS_REDLOCK_HOLD_H_
#define DLOCK_BACKENDS_REDIS_REDLOCK_HOLD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dlock/backend/backend.h"
#include "dlock/clock.h"
#include "redis_holds.h"

namespace dlock::redis {

// One write of a hold's liveness deadline on a master that the master
// confirmed: the request's send time and when its reply was in. The master
// ran it in between, and the deadline then lies a TTL ahead on its clock.
struct KeyWrite {
  MonoTime sent;
  MonoTime replied;
};

// Per master, the chain of one hold's confirmed writes of its liveness
// deadline: a stretch of local time over which the deadline is known to
// have lain ahead there without a gap, so that no waiter could take the
// hold over on that master meanwhile. A write vouches for the key from its
// reply (it ran no later) until its send time plus the TTL less drift; a
// write that vouches from within a chain extends it; one whose reply came
// after the chain's end may follow a gap, so it starts a new chain and the
// old one is over for good (its holds may have been taken over there).
// Thread-safe.
class LivenessChains {
 public:
  LivenessChains(size_t masters, absl::Duration ttl, Drift drift);

  // Adds a confirmed write on `master`; returns the chain it joined, or 0
  // when it vouches for nothing that is not over already (its reply came
  // after the end it vouches for, or after a newer chain began).
  uint64_t Confirm(size_t master, KeyWrite write);
  // Until when `chain` vouches for the key on `master`: its end while it is
  // the master's current chain, InfinitePast once broken (and for chain 0).
  MonoTime LiveUntil(size_t master, uint64_t chain) const;

 private:
  struct Chain {
    uint64_t id = 0;  // 0: none yet
    MonoTime start;
    MonoTime end;
  };

  const absl::Duration ttl_;
  const Drift drift_;
  mutable absl::Mutex mu_;
  std::vector<Chain> chains_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

// One hold as this client knows it: its token; until when a quorum vouches
// for its lease (lease − elapsed − drift after the last quorum); and per
// master, the lease vouched for there and the liveness chain its last grant
// there joined.
class RedlockHold : public HoldRecord {
 public:
  RedlockHold(uint64_t token, MonoTime valid_until, size_t masters);
  uint64_t token() const { return token_; }
  void Extend(MonoTime valid_until);
  MonoTime valid_until() const;

  // `master` granted the hold (`fresh_there`: created its key, rather than
  // re-entered it), its lease vouched until `lease_until`, its write of the
  // liveness key in `chain` (LivenessChains::Confirm).
  void Granted(size_t master, MonoTime lease_until, uint64_t chain,
               bool fresh_there);
  // `master` renewed the hold's lease.
  void Renewed(size_t master, MonoTime lease_until);
  // `master` answered that the owner does not hold the lock there.
  void GoneFrom(size_t master);

  // Until when the hold lives (its lease and its holder's liveness both
  // vouched for) on at least `blocking` masters: the `blocking`-th latest
  // of the masters' ends, InfinitePast when fewer masters have one.
  MonoTime BlockingUntil(const LivenessChains& chains, size_t blocking) const;

 private:
  struct OnMaster {
    MonoTime lease_until = MonoTime::InfinitePast();
    uint64_t chain = 0;
  };

  const uint64_t token_;
  mutable absl::Mutex mu_;
  MonoTime valid_until_ ABSL_GUARDED_BY(mu_);
  std::vector<OnMaster> masters_ ABSL_GUARDED_BY(mu_);
};

// The record the Redlock backend keeps: a hold with its lock, owner and
// shape (a lock's writer or reader, a leadership), which its heartbeat
// needs, and the chains of its own liveness deadline on each master (each
// lock or entry carries its holders' deadline).
class RedlockLockHold : public RedlockHold {
 public:
  RedlockLockHold(absl::string_view name, absl::string_view owner,
                  const HoldShape& shape, uint64_t token, MonoTime valid_until,
                  size_t masters, absl::Duration ttl, Drift drift)
      : RedlockHold(token, valid_until, masters),
        name_(name),
        owner_(owner),
        shape_(shape),
        chains_(masters, ttl, drift) {}

  const std::string& name() const { return name_; }
  const std::string& owner() const { return owner_; }
  const HoldShape& shape() const { return shape_; }
  LivenessChains& chains() { return chains_; }
  const LivenessChains& chains() const { return chains_; }

 private:
  const std::string name_;
  const std::string owner_;
  const HoldShape shape_;
  LivenessChains chains_;
};

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDLOCK_HOLD_H_
