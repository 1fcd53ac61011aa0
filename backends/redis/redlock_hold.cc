#include "redlock_hold.h"

#include <algorithm>
#include <functional>

namespace dlock::redis {

LivenessChains::LivenessChains(size_t masters, absl::Duration ttl, Drift drift)
    : ttl_(ttl), drift_(drift), chains_(masters) {}

uint64_t LivenessChains::Confirm(size_t master, KeyWrite write) {
  // The write ran between its send time and its reply, and the key then
  // lives a TTL on the master's clock: it surely exists over [replied, end].
  const MonoTime end = write.sent + ttl_ - drift_.Of(ttl_);
  if (write.replied >= end) return 0;
  absl::MutexLock lock(&mu_);
  Chain& chain = chains_[master];
  if (chain.id != 0 && write.replied <= chain.end && end >= chain.start) {
    // Overlaps the chain (replies may be counted out of order): no gap.
    chain.start = std::min(chain.start, write.replied);
    chain.end = std::max(chain.end, end);
    return chain.id;
  }
  // Over before the current chain began: a chain that already broke.
  if (chain.id != 0 && end < chain.start) return 0;
  // The first write, or one that may follow a gap in which the key was
  // gone: what the old chain vouched for may have been taken over there.
  chain = Chain{.id = next_id_++, .start = write.replied, .end = end};
  return chain.id;
}

MonoTime LivenessChains::LiveUntil(size_t master, uint64_t chain) const {
  absl::MutexLock lock(&mu_);
  const Chain& current = chains_[master];
  if (chain == 0 || current.id != chain) return MonoTime::InfinitePast();
  return current.end;
}

RedlockHold::RedlockHold(uint64_t token, MonoTime valid_until, size_t masters)
    : token_(token), valid_until_(valid_until), masters_(masters) {}

void RedlockHold::Extend(MonoTime valid_until) {
  absl::MutexLock lock(&mu_);
  valid_until_ = std::max(valid_until_, valid_until);
}

MonoTime RedlockHold::valid_until() const {
  absl::MutexLock lock(&mu_);
  return valid_until_;
}

void RedlockHold::Granted(size_t master, MonoTime lease_until, uint64_t chain,
                          bool fresh_there) {
  absl::MutexLock lock(&mu_);
  OnMaster& on = masters_[master];
  if (fresh_there) {
    // A key created anew: what was known of an earlier one (a longer kept
    // lease, an older chain) is not about this one.
    on = OnMaster{.lease_until = lease_until, .chain = chain};
    return;
  }
  on.lease_until = std::max(on.lease_until, lease_until);
  // A re-entry that vouches for no chain keeps the chain of the grant
  // before it: the key has lived without a gap since, or that chain broke.
  if (chain != 0) on.chain = chain;
}

void RedlockHold::Renewed(size_t master, MonoTime lease_until) {
  absl::MutexLock lock(&mu_);
  OnMaster& on = masters_[master];
  on.lease_until = std::max(on.lease_until, lease_until);
}

void RedlockHold::GoneFrom(size_t master) {
  absl::MutexLock lock(&mu_);
  masters_[master] = OnMaster{};
}

MonoTime RedlockHold::BlockingUntil(const LivenessChains& chains,
                                    size_t blocking) const {
  std::vector<OnMaster> copy;
  {
    absl::MutexLock lock(&mu_);
    copy = masters_;
  }
  std::vector<MonoTime> ends;
  for (size_t i = 0; i < copy.size(); ++i) {
    ends.push_back(
        std::min(copy[i].lease_until, chains.LiveUntil(i, copy[i].chain)));
  }
  if (blocking == 0 || ends.size() < blocking) return MonoTime::InfinitePast();
  std::nth_element(ends.begin(), ends.begin() + (blocking - 1), ends.end(),
                   std::greater<MonoTime>());
  return ends[blocking - 1];
}

}  // namespace dlock::redis
