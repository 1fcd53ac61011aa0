// Copyright dlock authors. The rules every backend shares with the core,
// written once: the shortest lease, how a lease goes to a server that counts
// whole milliseconds, the margin for clock drift in any "believed until"
// (C19), what GONE is, and how a permit grant's slots are written down. A
// backend uses these instead of its own copy, so
// that the core and every backend round and bound the same way.
#ifndef DLOCK_BACKEND_RULES_H_
#define DLOCK_BACKEND_RULES_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/errors.h"
#include "dlock/object_info.h"

namespace dlock {

// The shortest lease (and keep, ReleaseCall::keep_for) the core asks for; it
// refuses shorter ones as InvalidArgument before any backend sees them.
inline constexpr absl::Duration kMinLease = absl::Milliseconds(10);

// A lease (or a keep, a TTL) in the whole milliseconds a server counts,
// rounded UP, and at least 1. Up is the safe side: the core believes a hold
// until its send time plus the lease it asked for (less DriftMargin), so the
// server must never end it sooner (C19); a server that keeps it a fraction
// of a millisecond longer only frees it that much later, within C2's round
// trip. Rounding down would eat into the drift margin instead.
inline int64_t LeaseMillis(absl::Duration lease) {
  return std::max<int64_t>(
      1, absl::ToInt64Milliseconds(absl::Ceil(lease, absl::Milliseconds(1))));
}

// ReleaseCall::keep_for in whole milliseconds: 0 (free the lock) for zero,
// else LeaseMillis().
inline int64_t KeepMillis(absl::Duration keep_for) {
  return keep_for > absl::ZeroDuration() ? LeaseMillis(keep_for) : 0;
}

// How far the local clock may run slow against the server's while `span`
// runs: 1% of it plus 2 ms, as the Redlock algorithm allows. Whatever this
// client believes for `span` from a send it believes until send + span -
// DriftMargin(span): a hold's lease (C19), a session's timeout (ZooKeeper,
// PostgreSQL's session_grace), a liveness record's TTL.
inline absl::Duration DriftMargin(absl::Duration span) {
  return span / 100 + absl::Milliseconds(2);
}

// How long a place a waiter keeps on the server lasts: a semaphore's head
// waiter's, or a writer's intent that holds new readers back (C23). The
// waiter renews it with each attempt, and AcquireWithWakeups attempts at
// least every fallback poll: three polls outlive a late attempt or two, and
// a waiter that stopped asking (gone, timed out) gives the place up soon.
inline absl::Duration WaitingPlaceTtl(absl::Duration fallback_poll) {
  return 3 * fallback_poll;
}

// GONE: the owner does not hold the lock, or no longer does. What Release()
// and Renew() answer then, built with NotOwnerError() or LostError(): a
// FailedPrecondition marked with their ErrorKind, so that no other
// FailedPrecondition (a server error translated by code) can pass for it.
inline bool IsGone(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) &&
         (IsNotOwner(status) || IsLost(status));
}

// The letter that marks an object of `kind` in the core's qualified names
// and in backends' keys and paths (docs/design/primitives.md): 's' a
// semaphore, 'e' an election; a lock's own name has none ('\0').
inline char KindLetter(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kSemaphore:
      return 's';
    case ObjectKind::kElection:
      return 'e';
    case ObjectKind::kLock:
      break;
  }
  return '\0';
}

// A semaphore grant's permit slots as a backend stores them: "0,2" (C22).
inline std::string FormatSlots(const std::vector<int64_t>& slots) {
  return absl::StrJoin(slots, ",");
}
// The inverse; nullopt when `text` is not such a list.
inline std::optional<std::vector<int64_t>> ParseSlots(absl::string_view text) {
  std::vector<int64_t> slots;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t slot = 0;
    if (!absl::SimpleAtoi(part, &slot)) return std::nullopt;
    slots.push_back(slot);
  }
  return slots;
}

}  // namespace dlock

#endif  // DLOCK_BACKEND_RULES_H_
