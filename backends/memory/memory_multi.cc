// memory://: a multi-lock's names all or nothing (C25), checked then taken
// in one step under the instance's mutex; nothing is held while waiting,
// so no cycle of waits can form. A refused attempt waits on the name that
// refused it, woken by its release (C9).
#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "memory_backend.h"

namespace dlock::memory {

absl::StatusOr<MemoryBackend::AllOrRefusal> MemoryBackend::TryAllOnce(
    absl::Span<const AcquireCall> parts) {
  absl::MutexLock lock(&instance_->mu);
  const MonoTime now = clock_.Now();
  for (size_t i = 0; i < parts.size(); ++i) {
    // No writer's intent is recorded for a part: a multi-lock waiting on
    // one name must not keep others out of another.
    AcquireCall checked = parts[i];
    checked.deadline = MonoTime::InfinitePast();
    if (std::optional<absl::StatusOr<Attempt>> refused =
            Refusal(Key(checked.name), checked, now)) {
      if (!refused->ok()) return refused->status();
      return AllOrRefusal{.refused = i, .refusal = **refused};
    }
  }
  AllOrRefusal all;
  for (const AcquireCall& part : parts) {
    all.acquired.push_back(TakeLock(Key(part.name), part, now));
  }
  return all;
}

absl::StatusOr<std::vector<Grant>> MemoryBackend::AcquireAll(
    absl::Span<const AcquireCall> parts, MonoTime deadline,
    const CancelToken& cancel) {
  const MonoTime started = clock_.Now();
  // As AcquireWithWakeups: a waiter registered after a refusal, looking
  // again at once if a release was announced in between.
  std::optional<WakeupHub::Waiter> waiter;
  std::string waiting_on;
  while (true) {
    if (cancel.IsCancelled()) return WaitCancelledError(parts[0].name);
    const uint64_t notifications_before = releases_.notifications();
    const MonoTime sent = clock_.Now();
    absl::StatusOr<AllOrRefusal> attempt = TryAllOnce(parts);
    if (!attempt.ok()) return attempt.status();
    if (!attempt->acquired.empty()) {
      std::vector<Grant> grants;
      for (const Acquired& a : attempt->acquired) {
        grants.push_back(Grant{.fencing_token = a.fencing_token,
                               .hold_count = a.hold_count,
                               .sent = sent});
      }
      return grants;
    }
    const absl::string_view refused = parts[attempt->refused].name;
    const MonoTime now = clock_.Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("lock '", refused, "' is held by another owner (waited ",
                       absl::FormatDuration(now - started), ")"));
    }
    if (!waiter.has_value() || waiting_on != refused) {
      waiting_on = std::string(refused);
      waiter.emplace(releases_, waiting_on);
      if (releases_.notifications() != notifications_before) continue;
    }
    const absl::Duration nap =
        std::clamp(attempt->refusal.holder_lease_left + absl::Milliseconds(1),
                   absl::Milliseconds(1), fallback_poll_);
    waiter->Wait(std::min(deadline, now + nap), cancel);
  }
}

}  // namespace dlock::memory
