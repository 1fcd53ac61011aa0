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

absl::StatusOr<AllAttempt> MemoryBackend::TryAllOnce(
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
      return AllAttempt{.refused = i, .refusal = **refused};
    }
  }
  AllAttempt all;
  for (const AcquireCall& part : parts) {
    all.acquired.push_back(TakeLock(Key(part.name), part, now));
  }
  return all;
}

absl::StatusOr<std::vector<Grant>> MemoryBackend::AcquireAll(
    absl::Span<const AcquireCall> parts, MonoTime deadline,
    const CancelToken& cancel) {
  return AcquireAllWithWakeups(parts, deadline, cancel, releases_,
                               fallback_poll_,
                               [&] { return TryAllOnce(parts); });
}

}  // namespace dlock::memory
