// Copyright dlock authors. How long to pause between attempts that met a
// backend that is transiently unavailable (a failover under way): capped
// exponential backoff with jitter. The core's waiting acquire uses it
// (docs/semantics.md, "Riding out a failover"); so can an adapter or a
// backend that retries on its own.
#ifndef DLOCK_BACKOFF_H_
#define DLOCK_BACKOFF_H_

#include "absl/time/time.h"

namespace dlock {

// Each pause is drawn from [d/2, d], d doubling from `first` up to `cap`:
// the jitter keeps the waiters of one failover from all knocking on the new
// master at once. Not thread-safe: one per retry loop.
class RetryBackoff {
 public:
  explicit RetryBackoff(absl::Duration first = absl::Milliseconds(50),
                        absl::Duration cap = absl::Seconds(1))
      : next_(first), cap_(cap) {}
  absl::Duration Next();

 private:
  absl::Duration next_;
  const absl::Duration cap_;
};

}  // namespace dlock

#endif  // DLOCK_BACKOFF_H_
