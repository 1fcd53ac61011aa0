// Multi-locks (C25): several lock names all or nothing. On a backend that
// takes them in one atomic step (MultiLockMode::kAtomic), the core sends
// them together (client_core_multi.cc). Otherwise, the core's form, for
// every backend: the names one by one in one global order (their bytes),
// each waiting at most until the common deadline, and what was taken given
// back when one cannot be. No deadlock: every client waits only for a name
// greater than every name it holds, so no cycle of waits forms. The
// multi-hold's loss is the first loss of any of its holds, told once.
#include <algorithm>
#include <atomic>
#include <numeric>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "primitives.h"

namespace dlock {
namespace internal {

// What the holds of one multi-hold share: its single loss.
class MultiSite : public std::enable_shared_from_this<MultiSite> {
 public:
  explicit MultiSite(LockLostCallback on_lost) : on_lost_(std::move(on_lost)) {}

  static MultiHold Make(std::vector<Hold> holds,
                        std::shared_ptr<MultiSite> site) {
    CancelToken lost = site->lost_token_;
    return MultiHold(std::move(holds), std::move(lost), std::move(site));
  }

  // The on_lost of each name's acquisition.
  LockLostCallback OnLostOfOne() {
    return [self = shared_from_this()](const LockLostEvent& event) {
      self->Lost(event);
    };
  }

  bool lost() const { return lost_.load(std::memory_order_acquire); }
  absl::Status reason() const {
    absl::MutexLock lock(&mu_);
    return reason_;
  }

 private:
  // The first loss of any name is the multi-hold's, told once (C20, C25).
  void Lost(const LockLostEvent& event) {
    {
      absl::MutexLock lock(&mu_);
      if (lost_.load(std::memory_order_relaxed)) return;
      reason_ = event.reason;
      lost_.store(true, std::memory_order_release);
    }
    lost_token_.Cancel();
    if (on_lost_) on_lost_(event);
  }

  const LockLostCallback on_lost_;
  CancelToken lost_token_;
  std::atomic<bool> lost_{false};
  mutable absl::Mutex mu_;
  absl::Status reason_ ABSL_GUARDED_BY(mu_);
};

namespace {

// Every name in one step; the holds in the caller's order.
absl::StatusOr<std::vector<Hold>> AcquireAtomically(
    ClientCore& core, absl::Span<const std::string> names,
    const std::vector<size_t>& order, const AcquireOptions& options) {
  std::vector<std::string> sorted;
  for (size_t i : order) sorted.push_back(names[i]);
  absl::StatusOr<std::vector<Hold>> taken =
      core.AcquireTogether(sorted, options);
  if (!taken.ok()) return taken.status();
  std::vector<Hold> holds(names.size());
  for (size_t k = 0; k < order.size(); ++k) {
    holds[order[k]] = std::move((*taken)[k]);
  }
  return holds;
}

// The names one by one in `order`; the holds in the caller's order.
absl::StatusOr<std::vector<Hold>> AcquireInOrder(
    ClientCore& core, absl::Span<const std::string> names,
    const std::vector<size_t>& order, const AcquireOptions& options) {
  const bool waits = options.wait > absl::ZeroDuration() &&
                     options.wait != absl::InfiniteDuration();
  const MonoTime deadline = core.clock().Now() + options.wait;
  std::vector<Hold> holds(names.size());
  for (size_t i : order) {
    AcquireOptions one = options;
    if (waits) {
      one.wait = std::max(absl::ZeroDuration(), deadline - core.clock().Now());
    }
    absl::StatusOr<Hold> hold = core.Acquire(names[i], one);
    if (!hold.ok()) {
      // None is left held by this call: a release the backend does not
      // confirm is retried in the background (C21).
      for (Hold& taken : holds) {
        if (taken.active()) taken.Release().IgnoreError();
      }
      return WithContext(hold.status(),
                         absl::StrCat("AcquireAll of ", names.size(),
                                      " locks: none of them is held"));
    }
    holds[i] = *std::move(hold);
  }
  return holds;
}

}  // namespace

absl::StatusOr<MultiHold> AcquireAll(ClientCore& core,
                                     absl::Span<const std::string> names,
                                     const AcquireOptions& options) {
  std::vector<size_t> order(names.size());
  std::iota(order.begin(), order.end(), 0);
  // std::string compares as unsigned bytes: one order for every client.
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return names[a] < names[b]; });
  auto site = std::make_shared<MultiSite>(options.on_lost);
  AcquireOptions each = options;
  each.on_lost = site->OnLostOfOne();
  absl::StatusOr<std::vector<Hold>> holds =
      core.traits().multi_lock == MultiLockMode::kAtomic
          ? AcquireAtomically(core, names, order, each)
          : AcquireInOrder(core, names, order, each);
  if (!holds.ok()) return holds.status();
  return MultiSite::Make(*std::move(holds), std::move(site));
}

}  // namespace internal

MultiHold& MultiHold::operator=(MultiHold&& other) noexcept {
  if (this != &other) {
    holds_.clear();  // each Hold releases, reporting failures to the hook
    holds_ = std::move(other.holds_);
    other.holds_.clear();
    lost_token_ = std::move(other.lost_token_);
    site_ = std::move(other.site_);
  }
  return *this;
}

MultiHold::~MultiHold() = default;  // each Hold releases itself

std::vector<std::string> MultiHold::names() const {
  std::vector<std::string> out;
  out.reserve(holds_.size());
  for (const Hold& h : holds_) out.push_back(h.lock_name());
  return out;
}

uint64_t MultiHold::fencing_token(absl::string_view name) const {
  for (const Hold& h : holds_) {
    if (h.lock_name() == name) return h.fencing_token();
  }
  return 0;
}

LockState MultiHold::state() const {
  if (holds_.empty()) return LockState::kNotHeld;
  if (site_ != nullptr && site_->lost()) return LockState::kLost;
  // One name not believed (its deadline passed before its notice came, or
  // it was released by owner token) is the whole not held.
  for (const Hold& h : holds_) {
    if (h.state() != LockState::kHeld) return LockState::kLost;
  }
  return LockState::kHeld;
}

absl::Status MultiHold::lost_reason() const {
  if (site_ != nullptr && site_->lost()) return site_->reason();
  for (const Hold& h : holds_) {
    if (absl::Status why = h.lost_reason(); !why.ok()) return why;
  }
  return absl::OkStatus();
}

absl::Status MultiHold::Release() {
  absl::Status first;
  for (Hold& h : holds_) {
    absl::Status released = h.Release();
    if (!released.ok() && first.ok()) first = released;
  }
  holds_.clear();
  site_.reset();
  return first;
}

absl::Status MultiHold::Renew(std::optional<absl::Duration> lease) {
  absl::Status first;
  for (Hold& h : holds_) {
    absl::Status renewed = h.Renew(lease);
    if (!renewed.ok() && first.ok()) first = renewed;
  }
  return first;
}

}  // namespace dlock
