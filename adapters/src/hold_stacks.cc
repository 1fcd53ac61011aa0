#include "dlock/adapters/hold_stacks.h"

#include <utility>

#include "dlock/errors.h"

namespace dlock::internal {

void HoldStacks::Push(Hold hold) {
  absl::MutexLock lock(&mu_);
  if (shared_owner_) {
    by_token_.push_back(std::move(hold));
  } else {
    by_thread_[std::this_thread::get_id()].push_back(std::move(hold));
  }
}

Hold HoldStacks::Pop() {
  absl::MutexLock lock(&mu_);
  Hold innermost;
  if (shared_owner_) {
    if (!by_token_.empty()) {
      innermost = std::move(by_token_.back());
      by_token_.pop_back();
    }
    return innermost;
  }
  auto it = by_thread_.find(std::this_thread::get_id());
  if (it == by_thread_.end()) return innermost;
  innermost = std::move(it->second.back());
  it->second.pop_back();
  if (it->second.empty()) by_thread_.erase(it);
  return innermost;
}

const Hold* HoldStacks::Innermost() const {
  if (shared_owner_) return by_token_.empty() ? nullptr : &by_token_.back();
  auto it = by_thread_.find(std::this_thread::get_id());
  return it == by_thread_.end() ? nullptr : &it->second.back();
}

bool HoldStacks::CallerHolds() const {
  absl::MutexLock lock(&mu_);
  return Innermost() != nullptr;
}

absl::StatusOr<uint64_t> HoldStacks::FencingToken(
    absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  const Hold* current = Innermost();
  if (current == nullptr) {
    return WithContext(NotOwnerError(name),
                       "this owner holds nothing through this mutex");
  }
  if (current->state() == LockState::kHeld) return current->fencing_token();
  absl::Status why = current->lost_reason();
  return why.ok() ? NotOwnerError(name) : why;
}

LockState HoldStacks::State() const {
  absl::MutexLock lock(&mu_);
  const Hold* current = Innermost();
  return current == nullptr ? LockState::kNotHeld : current->state();
}

}  // namespace dlock::internal
