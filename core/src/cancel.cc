#include "dlock/cancel.h"

#include <atomic>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace dlock {

struct CancelToken::State {
  // Atomic so that IsCancelled() takes no lock: waiters call it while they
  // hold their own locks, which callbacks below take (lock order: mu, then
  // theirs).
  std::atomic<bool> cancelled{false};
  absl::Mutex mu;
  uint64_t next_id ABSL_GUARDED_BY(mu) = 1;
  absl::flat_hash_map<uint64_t, std::function<void()>> callbacks
      ABSL_GUARDED_BY(mu);
};

CancelToken::CancelToken() : state_(std::make_shared<State>()) {}

void CancelToken::Cancel() const {
  // Callbacks run under the lock, so that RemoveCallback() returning means
  // the callback is not running and will not run.
  absl::MutexLock lock(&state_->mu);
  if (state_->cancelled.exchange(true)) return;
  for (auto& [id, callback] : state_->callbacks) callback();
  state_->callbacks.clear();
}

bool CancelToken::IsCancelled() const { return state_->cancelled.load(); }

uint64_t CancelToken::AddCallback(std::function<void()> callback) const {
  {
    absl::MutexLock lock(&state_->mu);
    if (!state_->cancelled.load()) {
      uint64_t id = state_->next_id++;
      state_->callbacks.emplace(id, std::move(callback));
      return id;
    }
  }
  callback();
  return 0;
}

void CancelToken::RemoveCallback(uint64_t id) const {
  if (id == 0) return;
  absl::MutexLock lock(&state_->mu);
  state_->callbacks.erase(id);
}

}  // namespace dlock
