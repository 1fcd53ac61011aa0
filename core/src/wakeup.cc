#include "dlock/backend/wakeup.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/errors.h"

namespace dlock {

void WakeupHub::Notify(absl::string_view name) {
  absl::MutexLock lock(&mu_);
  notifications_.fetch_add(1, std::memory_order_release);
  auto it = slots_.find(name);
  if (it == slots_.end()) return;
  ++it->second.generation;
  it->second.changed.Signal();
}

void WakeupHub::NotifyAll() {
  absl::MutexLock lock(&mu_);
  notifications_.fetch_add(1, std::memory_order_release);
  ++global_generation_;
  for (auto& [name, slot] : slots_) slot.changed.Signal();
}

WakeupHub::Waiter::Waiter(WakeupHub& hub, absl::string_view name)
    : hub_(hub), name_(name) {
  absl::MutexLock lock(&hub_.mu_);
  slot_ = &hub_.slots_.try_emplace(name_, hub_.clock_).first->second;
  ++slot_->waiters;
  seen_generation_ = slot_->generation;
  seen_global_ = hub_.global_generation_;
}

WakeupHub::Waiter::~Waiter() {
  absl::MutexLock lock(&hub_.mu_);
  if (--slot_->waiters == 0) hub_.slots_.erase(name_);
}

bool WakeupHub::Waiter::Wait(MonoTime until, const CancelToken& cancel) {
  // Cancellation signals the slot's condition variable under the hub's lock,
  // so the check below cannot miss it.
  ScopedCancelCallback on_cancel(cancel, [this] {
    absl::MutexLock lock(&hub_.mu_);
    slot_->changed.Signal();
  });
  absl::MutexLock lock(&hub_.mu_);
  while (true) {
    if (slot_->generation != seen_generation_ ||
        hub_.global_generation_ != seen_global_) {
      seen_generation_ = slot_->generation;
      seen_global_ = hub_.global_generation_;
      return true;
    }
    if (cancel.IsCancelled() || hub_.clock_.Now() >= until) return false;
    slot_->changed.WaitUntil(&hub_.mu_, until);
  }
}

absl::StatusOr<Grant> AcquireWithWakeups(
    const AcquireCall& call, WakeupHub& hub, absl::Duration fallback_poll,
    absl::FunctionRef<absl::StatusOr<Attempt>()> attempt) {
  const Clock& clock = hub.clock();
  const MonoTime started = clock.Now();
  // Registered only once an attempt failed: most acquires succeed at once,
  // and registering takes the hub's one lock twice (every thread of the
  // client contends for it) and a map entry. A release announced between
  // the failed attempt and the registration moved the count read here.
  const uint64_t notifications_before = hub.notifications();
  std::optional<WakeupHub::Waiter> waiter;
  while (true) {
    if (call.cancel.IsCancelled()) {
      return WaitCancelledError(call.name);
    }
    const MonoTime sent = clock.Now();
    absl::StatusOr<Attempt> result = attempt();
    if (!result.ok()) return result.status();
    if (result->acquired.has_value()) {
      return Grant{.fencing_token = result->acquired->fencing_token,
                   .hold_count = result->acquired->hold_count,
                   .sent = sent};
    }
    const MonoTime now = clock.Now();
    if (now >= call.deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "lock '", call.name, "' is held by another owner (waited ",
          absl::FormatDuration(now - started), ")"));
    }
    // The holder's lease end is when the lock frees itself without any
    // announcement; 1ms past it, so that the backend has expired it.
    if (!waiter.has_value()) {
      waiter.emplace(hub, call.name);
      if (hub.notifications() != notifications_before) continue;
    }
    absl::Duration nap =
        std::clamp(result->holder_lease_left + absl::Milliseconds(1),
                   absl::Milliseconds(1), fallback_poll);
    waiter->Wait(std::min(call.deadline, now + nap), call.cancel);
  }
}

absl::StatusOr<std::vector<Grant>> AcquireAllWithWakeups(
    absl::Span<const AcquireCall> parts, MonoTime deadline,
    const CancelToken& cancel, WakeupHub& hub, absl::Duration fallback_poll,
    absl::FunctionRef<absl::StatusOr<AllAttempt>()> attempt) {
  const Clock& clock = hub.clock();
  const MonoTime started = clock.Now();
  // As AcquireWithWakeups: a waiter registered after a refusal, looking
  // again at once if a release was announced in between.
  std::optional<WakeupHub::Waiter> waiter;
  std::string waiting_on;
  while (true) {
    if (cancel.IsCancelled()) return WaitCancelledError(parts[0].name);
    const uint64_t notifications_before = hub.notifications();
    const MonoTime sent = clock.Now();
    absl::StatusOr<AllAttempt> result = attempt();
    if (!result.ok()) return result.status();
    if (!result->acquired.empty()) {
      std::vector<Grant> grants;
      for (const Acquired& a : result->acquired) {
        grants.push_back(Grant{.fencing_token = a.fencing_token,
                               .hold_count = a.hold_count,
                               .sent = sent});
      }
      return grants;
    }
    const absl::string_view refused = parts[result->refused].name;
    const MonoTime now = clock.Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("lock '", refused, "' is held by another owner (waited ",
                       absl::FormatDuration(now - started), ")"));
    }
    if (!waiter.has_value() || waiting_on != refused) {
      waiting_on = std::string(refused);
      waiter.emplace(hub, waiting_on);
      if (hub.notifications() != notifications_before) continue;
    }
    const absl::Duration nap =
        std::clamp(result->refusal.holder_lease_left + absl::Milliseconds(1),
                   absl::Milliseconds(1), fallback_poll);
    waiter->Wait(std::min(deadline, now + nap), cancel);
  }
}

}  // namespace dlock
