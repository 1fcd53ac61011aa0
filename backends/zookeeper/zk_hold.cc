#include "zk_hold.h"

#include <algorithm>

namespace dlock::zk {

std::shared_ptr<ZkHold> SessionHolds::NewRecord(const AcquireCall& call,
                                                const LocalHold& hold) {
  auto record =
      std::make_shared<ZkHold>(call.name, call.owner, call.shape, hold);
  // A node of another client's session: we cannot tell when that ends.
  if (hold.generation == 0) return record;
  absl::MutexLock lock(&mu_);
  if (holds_.size() >= prune_at_) {
    std::erase_if(holds_,
                  [](const std::weak_ptr<ZkHold>& r) { return r.expired(); });
    prune_at_ = std::max<size_t>(64, 2 * holds_.size());
  }
  holds_.push_back(record);
  return record;
}

std::vector<std::pair<std::shared_ptr<ZkHold>, LocalHold>>
SessionHolds::LoseSession(uint64_t generation, const absl::Status& why) {
  std::vector<std::pair<std::shared_ptr<ZkHold>, LocalHold>> lost;
  absl::MutexLock lock(&mu_);
  std::vector<std::weak_ptr<ZkHold>> kept;
  for (const std::weak_ptr<ZkHold>& weak : holds_) {
    std::shared_ptr<ZkHold> record = weak.lock();
    if (record == nullptr) continue;  // the core dropped it
    if (record->generation() != generation) {
      kept.push_back(weak);
      continue;
    }
    // Marked before the core is told: its release and renewal fail at once
    // from now on.
    std::optional<LocalHold> hold = record->LoseWithSession(why);
    if (!hold.has_value()) continue;  // ended already
    lost.emplace_back(std::move(record), *std::move(hold));
  }
  holds_.swap(kept);
  return lost;
}

}  // namespace dlock::zk
