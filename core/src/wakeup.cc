#include "dlock/backend/wakeup.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/errors.h"
#include "identity.h"

namespace dlock {

void WakeupHub::Notify(absl::string_view name, Waking waking) {
  absl::MutexLock lock(&mu_);
  notifications_.fetch_add(1, std::memory_order_release);
  auto it = slots_.find(name);
  if (it == slots_.end()) return;
  ++it->second.generation;
  if (waking == Waking::kSeveral) it->second.raced = it->second.generation;
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
      woken_for_a_race_ = slot_->raced > seen_generation_ ||
                          hub_.global_generation_ != seen_global_;
      seen_generation_ = slot_->generation;
      seen_global_ = hub_.global_generation_;
      return true;
    }
    if (cancel.IsCancelled() || hub_.clock_.Now() >= until) return false;
    slot_->changed.WaitUntil(&hub_.mu_, until);
  }
}

namespace {

// Every waiter a release announcement wakes attempts again, and with no
// queue the first attempt takes the lock. Who is first is then decided by
// differences that stay the same from one release to the next: the order in
// which the server tells its waiters (Redis writes a message to a channel's
// subscribers in the order they subscribed) and each client's own path and
// threads, tens to hundreds of microseconds apart. So one waiter could lose
// nearly every race (a history run: one worker granted once in 30 s while
// two others took turns). A random pause below this, longer than those
// differences, makes each race a fair draw; it is real time (a sleep this
// short needs no injected clock), and adds half of it on average to a lone
// waiter's hand-off: so a backend that knows its release had one waiter
// says so (WakeupHub::Waking::kOne), and that waiter attempts at once.
constexpr int64_t kRaceSpreadNs = 1000000;  // 1 ms

void PauseBeforeTheRace() {
  absl::SleepFor(absl::Nanoseconds(internal::RandomBits() % kRaceSpreadNs));
}

// What both wait loops do between attempts. The waiter is registered only
// once an attempt was refused: most acquires succeed at once, and registering
// takes the hub's one lock twice (every thread of the client contends for it)
// and a map entry. A release announced between the refused attempt and the
// registration moved the count read before the attempt: look again at once.
class WaitBetweenAttempts {
 public:
  WaitBetweenAttempts(WakeupHub& hub, absl::Duration fallback_poll,
                      MonoTime deadline, const CancelToken& cancel)
      : hub_(hub),
        fallback_poll_(fallback_poll),
        deadline_(deadline),
        cancel_(cancel),
        started_(hub.clock().Now()) {}

  void BeforeAttempt() { notifications_before_ = hub_.notifications(); }

  // After `name` refused the attempt: DeadlineExceeded once the deadline has
  // passed; otherwise waits (on `wake_on`, the name `name`'s releases are
  // announced under) until a wake-up, the holder's lease end (1 ms past it,
  // so that the backend has expired it), the fallback poll or the deadline,
  // and returns OK: attempt again. After a wake-up that may have woken
  // others too, the attempt comes a random moment later (PauseBeforeTheRace).
  absl::Status AfterRefusal(absl::string_view name, absl::string_view wake_on,
                            absl::Duration holder_lease_left) {
    const MonoTime now = hub_.clock().Now();
    if (now >= deadline_) {
      return absl::DeadlineExceededError(
          absl::StrCat("lock '", name, "' is held by another owner (waited ",
                       absl::FormatDuration(now - started_), ")"));
    }
    // An announcement that came before the waiter was registered is not
    // known to be a lone waiter's: it is raced for.
    bool announced = false, race = true;
    if (!waiter_.has_value() || waiter_->name() != wake_on) {
      waiter_.emplace(hub_, wake_on);
      announced = hub_.notifications() != notifications_before_;
    }
    if (!announced) {
      const absl::Duration nap =
          std::clamp(holder_lease_left + absl::Milliseconds(1),
                     absl::Milliseconds(1), fallback_poll_);
      announced = waiter_->Wait(std::min(deadline_, now + nap), cancel_);
      race = waiter_->woken_for_a_race();
    }
    if (announced && race) PauseBeforeTheRace();
    return absl::OkStatus();
  }

 private:
  WakeupHub& hub_;
  const absl::Duration fallback_poll_;
  const MonoTime deadline_;
  const CancelToken& cancel_;
  const MonoTime started_;
  uint64_t notifications_before_ = 0;
  std::optional<WakeupHub::Waiter> waiter_;
};

}  // namespace

absl::StatusOr<Grant> AcquireWithWakeups(
    const AcquireCall& call, WakeupHub& hub, absl::Duration fallback_poll,
    absl::FunctionRef<absl::StatusOr<Attempt>()> attempt) {
  return AcquireWithWakeups(call, call.name, hub, fallback_poll, attempt);
}

absl::StatusOr<Grant> AcquireWithWakeups(
    const AcquireCall& call, absl::string_view wake_on, WakeupHub& hub,
    absl::Duration fallback_poll,
    absl::FunctionRef<absl::StatusOr<Attempt>()> attempt) {
  WaitBetweenAttempts wait(hub, fallback_poll, call.deadline, call.cancel);
  while (true) {
    if (call.cancel.IsCancelled()) return WaitCancelledError(call.name);
    wait.BeforeAttempt();
    const MonoTime sent = hub.clock().Now();
    absl::StatusOr<Attempt> result = attempt();
    if (!result.ok()) return result.status();
    if (result->acquired.has_value()) {
      return Grant{.fencing_token = result->acquired->fencing_token,
                   .hold_count = result->acquired->hold_count,
                   .sent = sent};
    }
    if (absl::Status s =
            wait.AfterRefusal(call.name, wake_on, result->holder_lease_left);
        !s.ok()) {
      return s;
    }
  }
}

absl::StatusOr<std::vector<Grant>> AcquireAllWithWakeups(
    absl::Span<const AcquireCall> parts, MonoTime deadline,
    const CancelToken& cancel, WakeupHub& hub, absl::Duration fallback_poll,
    absl::FunctionRef<absl::StatusOr<AllAttempt>()> attempt) {
  // A refused attempt waits on the part that refused it.
  WaitBetweenAttempts wait(hub, fallback_poll, deadline, cancel);
  while (true) {
    if (cancel.IsCancelled()) return WaitCancelledError(parts[0].name);
    wait.BeforeAttempt();
    const MonoTime sent = hub.clock().Now();
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
    if (absl::Status s = wait.AfterRefusal(refused, refused,
                                           result->refusal.holder_lease_left);
        !s.ok()) {
      return s;
    }
  }
}

}  // namespace dlock
