// Copyright dlock authors. What the std-style mutexes (std_mutex.h,
// std_shared_mutex.h) keep of each lock() they made: the Holds of each
// owner, innermost last. Not for use on its own.
#ifndef DLOCK_ADAPTERS_HOLD_STACKS_H_
#define DLOCK_ADAPTERS_HOLD_STACKS_H_

#include <cstdint>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "dlock/hold.h"
#include "dlock/lock.h"

namespace dlock::internal {

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
