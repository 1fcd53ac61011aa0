// Copyright dlock authors. What a Redis client keeps of its own holds so
// that their liveness deadlines can be refreshed: each lock carries its
// holders' deadline in its own value (one key, one slot), so the heartbeat
// refreshes every held lock, and each hold is believed only as long as its
// own deadline was confirmed (docs/redis.md, holder liveness).
#ifndef DLOCK_BACKENDS_REDIS_REDIS_HOLDS_H_
#define DLOCK_BACKENDS_REDIS_REDIS_HOLDS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dlock/backend/backend.h"
#include "dlock/clock.h"

namespace dlock::redis {

// How far a master's clock may run fast against this client's over a span,
// as the Redlock algorithm allows: factor × span + floor.
struct Drift {
  double factor = 0.01;
  absl::Duration floor = absl::Milliseconds(2);
  absl::Duration Of(absl::Duration span) const { return span * factor + floor; }
};

// One hold on one master (redis://, Sentinel): its lock, owner and token,
// and until when its liveness deadline is known to lie ahead.
class RedisHold : public HoldRecord {
 public:
  RedisHold(absl::string_view name, absl::string_view owner, uint64_t token)
      : name_(name), owner_(owner), token_(token) {}

  const std::string& name() const { return name_; }
  const std::string& owner() const { return owner_; }
  uint64_t token() const { return token_; }

  // A write of the deadline (a grant, a renewal, a heartbeat) sent at
  // `sent` was confirmed: the master set it to at least its receipt plus
  // the TTL, which is no earlier than `sent` plus the TTL less drift.
  void Confirmed(MonoTime sent, absl::Duration ttl, Drift drift);
  MonoTime live_until() const;

 private:
  const std::string name_;
  const std::string owner_;
  const uint64_t token_;
  mutable absl::Mutex mu_;
  MonoTime live_until_ ABSL_GUARDED_BY(mu_) = MonoTime::InfinitePast();
};

// The holds whose records the core keeps, for the heartbeat: weak
// references, so that a hold the core let go of drops out by itself.
// Thread-safe.
template <typename Hold>
class HeldLocks {
 public:
  void Add(const std::shared_ptr<Hold>& hold) {
    absl::MutexLock lock(&mu_);
    holds_.push_back(hold);
  }

  // The holds still kept; forgets the others.
  std::vector<std::shared_ptr<Hold>> Current() {
    std::vector<std::shared_ptr<Hold>> out;
    absl::MutexLock lock(&mu_);
    size_t kept = 0;
    for (size_t i = 0; i < holds_.size(); ++i) {
      if (std::shared_ptr<Hold> hold = holds_[i].lock()) {
        out.push_back(std::move(hold));
        if (kept != i) holds_[kept] = std::move(holds_[i]);
        ++kept;
      }
    }
    holds_.resize(kept);
    return out;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::weak_ptr<Hold>> holds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_HOLDS_H_
