#include "redis_holds.h"

#include <algorithm>

namespace dlock::redis {

void RedisHold::Confirmed(MonoTime sent, absl::Duration ttl, Drift drift) {
  const MonoTime until = sent + ttl - drift.Of(ttl);
  absl::MutexLock lock(&mu_);
  live_until_ = std::max(live_until_, until);
}

MonoTime RedisHold::live_until() const {
  absl::MutexLock lock(&mu_);
  return live_until_;
}

}  // namespace dlock::redis
