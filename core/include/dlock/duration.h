// Copyright dlock authors. Durations as people write them: one parser for
// every CLI flag, URI option and config key, which checks the range before
// any backend sees the value, and one way to print them back.
#ifndef DLOCK_DURATION_H_
#define DLOCK_DURATION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dlock {

// The longest lease dlock takes (a watchdog lease, an explicit lease, a
// scheduled job's --at-most-for): every backend can store it, and anything
// longer is a typo, not a lease.
inline constexpr absl::Duration kLongestLease = absl::Hours(24 * 366);

// The closed range a duration must be in.
struct DurationRange {
  absl::Duration min;
  absl::Duration max;
};

// Any positive duration up to kLongestLease.
inline constexpr DurationRange kPositiveDuration{absl::Nanoseconds(1),
                                                 kLongestLease};

// Parses one or more <number><unit> terms, summed: "500ms", "30s", "2m",
// "1h", "1d", "1h30m", "1.5s"; units ns, us, ms, s, m, h, d. A bare "0" is
// zero. No sign, no spaces, no "inf". InvalidArgument saying how to write a
// duration for anything else ("not a positive duration" where `range`
// starts above zero), and stating `range` for a value outside it.
absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text,
                                             DurationRange range);

// "from 30ms to 366d".
std::string DurationRangeText(DurationRange range);

// For people: days as "d" ("366d", "1d12h"), and rounded to what a person
// reads: milliseconds under a second, a tenth of a second under a minute,
// seconds under an hour, minutes beyond. "forever" for InfiniteDuration.
std::string FormatDurationForPeople(absl::Duration d);

}  // namespace dlock

#endif  // DLOCK_DURATION_H_
