#include "memory_instance.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace dlock::memory {

void Holders::Purge(MonoTime now) {
  for (auto it = owners.begin(); it != owners.end();) {
    if (it->second.expires <= now) {
      it = owners.erase(it);
    } else {
      ++it;
    }
  }
  if (place.has_value() && place->until <= now) place.reset();
}

int64_t Holders::PermitsUsed() const {
  int64_t used = 0;
  for (const auto& [owner, holder] : owners) used += holder.permits;
  return used;
}

std::vector<int64_t> Holders::FreeSlots(int64_t count) const {
  std::set<int64_t> taken;
  for (const auto& [owner, holder] : owners) {
    taken.insert(holder.slots.begin(), holder.slots.end());
  }
  std::vector<int64_t> free;
  for (int64_t slot = 0;
       slot < limit && static_cast<int64_t>(free.size()) < count; ++slot) {
    if (!taken.count(slot)) free.push_back(slot);
  }
  return free;
}

absl::Duration Holders::SoonestEnd(MonoTime now) const {
  MonoTime soonest = MonoTime::InfiniteFuture();
  for (const auto& [owner, holder] : owners) {
    soonest = std::min(soonest, holder.expires);
  }
  if (place.has_value()) soonest = std::min(soonest, place->until);
  return soonest - now;
}

void Holders::KeepPlaceFor(absl::string_view owner, int64_t permits,
                           MonoTime until) {
  if (place.has_value() && place->owner != owner) return;  // another's
  place =
      Place{.owner = std::string(owner), .permits = permits, .until = until};
}

bool Holders::DropPlaceOf(absl::string_view owner) {
  if (!place.has_value() || place->owner != owner) return false;
  place.reset();
  return true;
}

void Holders::Describe(MonoTime now, bool shared, ObjectInfo& info) const {
  for (const auto& [owner, holder] : owners) {
    info.holders.push_back(HolderInfo{.owner = owner,
                                      .shared = shared,
                                      .hold_count = holder.holds,
                                      .fencing_token = holder.fencing_token,
                                      .slots = holder.slots,
                                      .remaining_lease = holder.expires - now,
                                      .since = holder.since});
  }
  if (place.has_value()) {
    info.waiter = WaiterInfo{.owner = place->owner, .permits = place->permits};
  }
  info.value = value;
}

WakeupHub& MemoryInstance::ReleasesIn(const std::string& ns) {
  absl::MutexLock lock(&hubs_mu_);
  std::unique_ptr<WakeupHub>& hub = hubs_[ns];
  if (hub == nullptr) hub = std::make_unique<WakeupHub>(clock);
  return *hub;
}

Entry* MemoryInstance::Find(const std::string& key, MonoTime now) {
  auto it = locks.find(key);
  if (it == locks.end()) return nullptr;
  if (it->second.expires <= now) {
    locks.erase(it);
    return nullptr;
  }
  return &it->second;
}

Holders* MemoryInstance::FindObject(const std::string& key, MonoTime now) {
  auto it = objects.find(key);
  if (it == objects.end()) return nullptr;
  it->second.Purge(now);
  if (it->second.empty()) {
    objects.erase(it);
    return nullptr;
  }
  return &it->second;
}

absl::StatusOr<std::shared_ptr<MemoryInstance>> InstanceNamed(
    const std::string& name, const std::shared_ptr<Clock>& clock) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* instances =
      new std::map<std::string, std::shared_ptr<MemoryInstance>>;
  absl::MutexLock lock(&mu);
  std::shared_ptr<MemoryInstance>& instance = (*instances)[name];
  if (instance == nullptr) {
    instance = std::make_shared<MemoryInstance>(clock);
  } else if (instance->clock_owner != clock) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory://", name,
        " is in use by clients with another ClientOptions::clock; clients "
        "of one instance share one clock"));
  }
  return instance;
}

}  // namespace dlock::memory
