#include "redis_holds.h"

#include <limits>

namespace dlock::redis {

void RedisHold::Confirmed(MonoTime sent, absl::Duration ttl, Drift drift) {
  const int64_t until =
      absl::ToInt64Nanoseconds((sent + ttl - drift.Of(ttl)).since_origin());
  int64_t seen = live_until_ns_.load(std::memory_order_relaxed);
  // Confirmations may arrive out of order: the latest end wins.
  while (seen < until && !live_until_ns_.compare_exchange_weak(
                             seen, until, std::memory_order_relaxed)) {
  }
}

MonoTime RedisHold::live_until() const {
  const int64_t ns = live_until_ns_.load(std::memory_order_relaxed);
  if (ns == std::numeric_limits<int64_t>::min()) {
    return MonoTime::InfinitePast();
  }
  return MonoTime::FromSinceOrigin(absl::Nanoseconds(ns));
}

void RecordGrant(const AcquireCall& call, Grant& grant,
                 std::string fresh_prefix, absl::Duration ttl, Drift drift,
                 HeldLocks<RedisHold>& held) {
  const bool liveness = ttl > absl::ZeroDuration();
  auto* record = static_cast<RedisHold*>(call.held);
  if (record != nullptr && record->token() == grant.fencing_token) {
    if (liveness) record->Confirmed(grant.sent, ttl, drift);
    return;
  }
  if (fresh_prefix.empty() && !liveness) return;
  auto hold =
      std::make_shared<RedisHold>(call.name, call.owner, grant.fencing_token,
                                  std::move(fresh_prefix), call.shape);
  if (liveness) {
    hold->Confirmed(grant.sent, ttl, drift);
    held.Add(hold);
  }
  grant.record = std::move(hold);
}

}  // namespace dlock::redis
