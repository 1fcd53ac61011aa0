#include "dlock/backoff.h"

#include <algorithm>
#include <cstdint>

#include "identity.h"

namespace dlock {

absl::Duration RetryBackoff::Next() {
  const absl::Duration d = next_;
  next_ = std::min(next_ * 2, cap_);
  const int64_t half_ns = absl::ToInt64Nanoseconds(d) / 2;
  if (half_ns <= 0) return d;
  return d - absl::Nanoseconds(internal::RandomBits() % (half_ns + 1));
}

}  // namespace dlock
