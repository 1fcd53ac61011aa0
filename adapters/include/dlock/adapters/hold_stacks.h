// Copyright dlock authors. What the std-style mutexes (std_mutex.h,
// std_shared_mutex.h) share: the Holds of each owner, innermost last, and
// the conversion of a std::chrono wait. Not for use on its own.
#ifndef DLOCK_ADAPTERS_HOLD_STACKS_H_
#define DLOCK_ADAPTERS_HOLD_STACKS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dlock/hold.h"
#include "dlock/lock.h"

namespace dlock::internal {

// A std::chrono wait as an absl one: negative is zero, and a huge one
// (duration::max() means "forever") saturates instead of overflowing.
template <class Rep, class Period>
absl::Duration ToAbsl(const std::chrono::duration<Rep, Period>& d) {
  using Nanos = std::chrono::duration<double, std::nano>;
  const double nanos = std::chrono::duration_cast<Nanos>(d).count();
  if (nanos <= 0) return absl::ZeroDuration();
  if (nanos >= 9e18) return absl::InfiniteDuration();
  return absl::Nanoseconds(static_cast<int64_t>(nanos));
}

// Per thread for the default owner (a std mutex is per thread), or one
// stack that every thread shares when the mutex acts for an owner token.
// Safe to share between threads.
class HoldStacks {
 public:
  explicit HoldStacks(bool shared_owner) : shared_owner_(shared_owner) {}

  void Push(Hold hold);
  // Takes the caller's innermost hold off its stack; an empty Hold when it
  // has none.
  Hold Pop();
  // Whether the caller's owner holds anything through this stack.
  bool CallerHolds() const;
  // The fencing token of the caller's innermost hold of lock `name`;
  // FailedPrecondition when it has none (IsNotOwner) or lost it (IsLost).
  absl::StatusOr<uint64_t> FencingToken(absl::string_view name) const;
  // The local view of that hold; kNotHeld when there is none.
  LockState State() const;

 private:
  const Hold* Innermost() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const bool shared_owner_;
  mutable absl::Mutex mu_;
  std::unordered_map<std::thread::id, std::vector<Hold>> by_thread_
      ABSL_GUARDED_BY(mu_);
  std::vector<Hold> by_token_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dlock::internal

#endif  // DLOCK_ADAPTERS_HOLD_STACKS_H_
