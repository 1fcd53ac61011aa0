// Copyright dlock authors. What a Redis client keeps of its own holds so
// that their liveness deadlines can be refreshed: each lock carries its
// holders' deadline in its own value (one key, one slot), so the heartbeat
// refreshes every held lock, and each hold is believed only as long as its
// own deadline was confirmed (docs/redis.md, holder liveness).
#ifndef DLOCK_BACKENDS_REDIS_REDIS_HOLDS_H_
#define DLOCK_BACKENDS_REDIS_REDIS_HOLDS_H_

#include <atomic>
#include <cstdint>
#include <limits>
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
// as the Redlock algorithm allows: factor × span + floor. The defaults are
// DriftMargin()'s (dlock/backend/rules.h); drift_factor= and drift_floor=
// tune them, as Redlock clients may.
struct Drift {
  double factor = 0.01;
  absl::Duration floor = absl::Milliseconds(2);
  absl::Duration Of(absl::Duration span) const { return span * factor + floor; }
};

// One hold on one master (redis://, Sentinel): its lock, owner and token,
// what its fresh grant wrote before the owner (empty for a re-entry), and
// until when its liveness deadline is known to lie ahead.
// `shape`: a lock's writer, or a hold in a holders hash (a lock's read, a
// semaphore's permits, a leadership).
class RedisHold : public HoldRecord {
 public:
  RedisHold(absl::string_view name, absl::string_view owner, uint64_t token,
            std::string fresh_prefix, HoldShape shape = HoldShape{})
      : name_(name),
        owner_(owner),
        token_(token),
        fresh_prefix_(std::move(fresh_prefix)),
        shape_(shape) {}

  const std::string& name() const { return name_; }
  const HoldShape& shape() const { return shape_; }
  const std::string& owner() const { return owner_; }
  uint64_t token() const { return token_; }
  // What the release sends back (ReleaseScript's fresh_prefix).
  const std::string& fresh_prefix() const { return fresh_prefix_; }

  // A write of the deadline (a grant, a renewal, a heartbeat) sent at
  // `sent` was confirmed: the master set it to at least its receipt plus
  // the TTL, which is no earlier than `sent` plus the TTL less drift.
  void Confirmed(MonoTime sent, absl::Duration ttl, Drift drift);
  // Read by HeldUntil for every hold each time the core looks at
  // deadlines: a lock-free load, not a mutex per hold.
  MonoTime live_until() const;

 private:
  const std::string name_;
  const std::string owner_;
  const uint64_t token_;
  const std::string fresh_prefix_;
  const HoldShape shape_;
  // Nanoseconds since the clock's origin; the minimum: never confirmed.
  std::atomic<int64_t> live_until_ns_{std::numeric_limits<int64_t>::min()};
};

template <typename Hold>
class HeldLocks;

// The grant's record, kept in `grant` (one master's hold): a re-entry of
// the same hold confirms its liveness deadline; a fresh hold gets one,
// which keeps what its grant wrote (for the release) and, with liveness
// (`ttl` finite and positive), the deadline, and joins `held` for the
// heartbeat.
void RecordGrant(const AcquireCall& call, Grant& grant,
                 std::string fresh_prefix, absl::Duration ttl, Drift drift,
                 HeldLocks<RedisHold>& held);

// The holds whose records the core keeps, for the heartbeat: weak
// references, so that a hold the core let go of drops out by itself.
// Thread-safe.
template <typename Hold>
class HeldLocks {
 public:
  void Add(const std::shared_ptr<Hold>& hold) {
    absl::MutexLock lock(&mu_);
    // A weak reference keeps a record made by make_shared in memory: the
    // ones whose holds ended go whenever the list doubled since the last
    // look, so that it stays within twice the holds kept (a client that
    // takes 100,000 names one after another keeps a handful).
    if (holds_.size() >= 2 * kept_ + 16) Prune(nullptr);
    holds_.push_back(hold);
  }

  // The holds still kept; forgets the others.
  std::vector<std::shared_ptr<Hold>> Current() {
    std::vector<std::shared_ptr<Hold>> out;
    absl::MutexLock lock(&mu_);
    Prune(&out);
    return out;
  }

 private:
  void Prune(std::vector<std::shared_ptr<Hold>>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    size_t kept = 0;
    for (size_t i = 0; i < holds_.size(); ++i) {
      if (std::shared_ptr<Hold> hold = holds_[i].lock()) {
        if (out != nullptr) out->push_back(std::move(hold));
        if (kept != i) holds_[kept] = std::move(holds_[i]);
        ++kept;
      }
    }
    holds_.resize(kept);
    kept_ = kept;
  }

  absl::Mutex mu_;
  std::vector<std::weak_ptr<Hold>> holds_ ABSL_GUARDED_BY(mu_);
  size_t kept_ ABSL_GUARDED_BY(mu_) = 0;  // at the last Prune
};

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_HOLDS_H_
