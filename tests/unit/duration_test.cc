// The one duration parser of flags, URI options and config keys, and how
// durations are printed for people.
#include "dlock/duration.h"

#include <utility>
#include <vector>

#include "dlock/client.h"
#include "dlock/errors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

using ::testing::HasSubstr;

constexpr DurationRange kWide{.min = absl::ZeroDuration(),
                              .max = kLongestLease};

TEST(ParseDuration, TakesTermsWithDays) {
  const std::vector<std::pair<const char*, absl::Duration>> cases = {
      {"0", absl::ZeroDuration()},
      {"500ms", absl::Milliseconds(500)},
      {"30s", absl::Seconds(30)},
      {"1.5s", absl::Milliseconds(1500)},
      {"2m", absl::Minutes(2)},
      {"1h30m", absl::Minutes(90)},
      {"1d", absl::Hours(24)},
      {"7d", absl::Hours(24 * 7)},
      {"1d12h", absl::Hours(36)},
      {"0.5d", absl::Hours(12)},
      {"250us", absl::Microseconds(250)},
      {"366d", kLongestLease},
  };
  for (const auto& [text, want] : cases) {
    absl::StatusOr<absl::Duration> got = ParseDuration(text, kWide);
    ASSERT_OK(got) << text;
    EXPECT_EQ(*got, want) << text;
  }
}

TEST(ParseDuration, RefusesWhatIsNotADurationSayingHowToWriteOne) {
  for (const char* text : {"", "10", "1x", "s", " 1s", "1s ", "-1s", "+1s",
                           "inf", "1.s", ".5s", "1..5s", "1d-2h", "1H"}) {
    absl::StatusOr<absl::Duration> got = ParseDuration(text, kWide);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(got.status().message(), HasSubstr("is not a duration; write "
                                                  "it like 500ms, 30s, 2m, 1h "
                                                  "or 1d"))
        << text;
  }
}

TEST(ParseDuration, StatesTheRangeOfAValueOutsideIt) {
  // The lease that reached Redis as "ERR value is not an integer".
  for (const char* text :
       {"9999999999999h", "99999999999999999999999h", "367d", "400d1s"}) {
    absl::StatusOr<absl::Duration> got = ParseDuration(text, kWide);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(
        got.status().message(),
        absl::StrCat("'", text,
                     "' is out of range: give a duration from 0 to 366d"));
  }
  absl::StatusOr<absl::Duration> short_lease = ParseDuration(
      "5ms", {.min = absl::Milliseconds(30), .max = absl::Hours(1)});
  EXPECT_EQ(short_lease.status().message(),
            "'5ms' is out of range: give a duration from 30ms to 1h");
}

TEST(ParseDuration, APositiveRangeRefusesZeroAsNotPositive) {
  absl::StatusOr<absl::Duration> zero = ParseDuration("0", kPositiveDuration);
  EXPECT_EQ(zero.status().message(),
            "'0' is not a positive duration; write it like 500ms, 30s, 2m, 1h "
            "or 1d (at most 366d)");
  EXPECT_EQ(ParseDuration("0s", kPositiveDuration).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FormatDurationForPeople, RoundsToWhatAPersonReads) {
  const std::vector<std::pair<absl::Duration, const char*>> cases = {
      {absl::ZeroDuration(), "0"},
      {absl::Microseconds(250), "250us"},
      {absl::Microseconds(1499), "1ms"},
      {absl::Milliseconds(500), "500ms"},
      {absl::Milliseconds(5003), "5s"},  // a wait of 5s that ran 5.003s
      {absl::Milliseconds(1549), "1.5s"},
      {absl::Milliseconds(59960), "1m"},
      {absl::Seconds(125) + absl::Milliseconds(400), "2m5s"},
      {absl::Hours(2) + absl::Seconds(29), "2h"},
      {absl::Hours(24), "1d"},
      {absl::Hours(36) + absl::Minutes(5), "1d12h5m"},
      {kLongestLease, "366d"},
      {-absl::Seconds(3), "-3s"},
      {absl::InfiniteDuration(), "forever"},
  };
  for (const auto& [d, want] : cases) {
    EXPECT_EQ(FormatDurationForPeople(d), want) << absl::FormatDuration(d);
  }
}

// The core refuses a lease no backend should see, as the CLI does.
TEST(LongestLease, ConnectAndAcquireRefuseLongerLeases) {
  ClientOptions options;
  options.watchdog_lease = kLongestLease + absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<LockClient>> refused =
      Connect("memory://longest-lease", options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("from 30ms to 366d"));

  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect("memory://longest-lease");
  ASSERT_OK(client);
  absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
      (*client)->GetLock("x");
  ASSERT_OK(lock);
  absl::StatusOr<Hold> hold =
      (*lock)->Acquire({.lease = absl::Hours(9999999999999)});
  EXPECT_EQ(hold.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(hold.status().message(), HasSubstr("from 10ms to 366d"));
  EXPECT_OK((*lock)->Acquire({.lease = kLongestLease}));
}

// A wait that ran out says how long, as a person would.
TEST(WaitExpiredError, RoundsTheWait) {
  EXPECT_EQ(WaitExpiredError("x", absl::Milliseconds(5003)).message(),
            "lock 'x' not acquired within 5s: another owner still holds it");
}

}  // namespace
}  // namespace dlock
