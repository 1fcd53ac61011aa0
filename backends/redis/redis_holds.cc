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

}  // namespace dlock::redis
