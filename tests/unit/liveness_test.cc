// Copyright dlock authors. Holder liveness in the core (docs/reliability.md)
// on an injected clock: memory:// behind a FaultPlan that emulates a
// liveness record, so that the test decides which heartbeats are confirmed.
// A hold, whatever its lease, is believed only while this client's liveness
// record is confirmed, and told lost once when it is not (C19, C20).
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dlock/client.h"
#include "dlock/clock.h"
#include "dlock/errors.h"
#include "fault_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

using test::FaultPlan;
using ::testing::HasSubstr;

constexpr absl::Duration kReact = absl::Seconds(5);
constexpr absl::Duration kQuiet = absl::Milliseconds(150);
constexpr absl::Duration kTenMinutes = absl::Minutes(10);

struct Notices {
  absl::Notification told;
  std::atomic<int> count{0};
  LockLostEvent event;
  LockLostCallback Callback() {
    return [this](const LockLostEvent& e) {
      if (count++ == 0) {
        event = e;
        told.Notify();
      }
    };
  }
};

class LivenessTest : public ::testing::Test {
 protected:
  LivenessTest() { faults_->EmulateLivenessRecord(); }

  absl::StatusOr<std::unique_ptr<LockClient>> Open(
      absl::Duration ttl, absl::string_view uri_options = "") {
    ClientOptions options;
    options.clock = clock_;
    options.liveness_ttl = ttl;
    options.backend_decorator = faults_->Decorator();
    static std::atomic<int> n{0};
    return dlock::Connect(
        absl::StrCat("memory://liveness-", getpid(), "-", n++, uri_options),
        options);
  }
  std::unique_ptr<LockClient> MustOpen(absl::Duration ttl,
                                       absl::string_view uri_options = "") {
    absl::StatusOr<std::unique_ptr<LockClient>> client = Open(ttl, uri_options);
    EXPECT_OK(client);
    return client.ok() ? *std::move(client) : nullptr;
  }

  // Moves the clock in steps shorter than a heartbeat period, letting the
  // renewer send each heartbeat that comes due.
  void AdvanceWithHeartbeats(absl::Duration total, absl::Duration step) {
    for (absl::Duration done; done < total; done += step) {
      const int before = faults_->calls(FaultPlan::kLiveness);
      clock_->Advance(step);
      ASSERT_TRUE(
          faults_->WaitForCalls(FaultPlan::kLiveness, before + 1, kReact))
          << "no heartbeat after " << done + step;
    }
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<FaultPlan> faults_ = std::make_shared<FaultPlan>();
};

TEST_F(LivenessTest, UnconfirmedHeartbeatEndsEveryHoldAtTheLivenessDeadline) {
  std::unique_ptr<LockClient> client = MustOpen(absl::Seconds(1));
  faults_->Set(FaultPlan::kLiveness, {.fail_before = true});
  Notices leased_notices, watchdog_notices;
  AcquireOptions leased{.lease = kTenMinutes,
                        .on_lost = leased_notices.Callback()};
  absl::StatusOr<Hold> long_lease =
      (*client->GetLock("ten minutes"))->Acquire(leased);
  ASSERT_OK(long_lease);
  AcquireOptions renewed{.on_lost = watchdog_notices.Callback()};
  absl::StatusOr<Hold> watchdog =
      (*client->GetLock("renewed"))->Acquire(renewed);
  ASSERT_OK(watchdog);

  // The grants count as refreshes: believed until +1 s less 12 ms of drift
  // margin, told 20 ms before that.
  clock_->Advance(absl::Milliseconds(900));
  ASSERT_TRUE(faults_->WaitForCalls(FaultPlan::kLiveness, 1, kReact));
  absl::SleepFor(kQuiet);
  EXPECT_EQ(long_lease->state(), LockState::kHeld);
  EXPECT_EQ(watchdog->state(), LockState::kHeld);
  EXPECT_FALSE(leased_notices.told.HasBeenNotified());

  clock_->Advance(absl::Milliseconds(70));
  ASSERT_TRUE(leased_notices.told.WaitForNotificationWithTimeout(kReact));
  ASSERT_TRUE(watchdog_notices.told.WaitForNotificationWithTimeout(kReact));
  EXPECT_EQ(long_lease->state(), LockState::kLost);
  EXPECT_EQ(watchdog->state(), LockState::kLost);
  EXPECT_TRUE(IsLost(long_lease->lost_reason()));
  EXPECT_THAT(std::string(leased_notices.event.reason.message()),
              HasSubstr("liveness record"));

  // Told once, even when heartbeats get through again later.
  faults_->Clear(FaultPlan::kLiveness);
  clock_->Advance(absl::Seconds(2));
  absl::SleepFor(kQuiet);
  EXPECT_EQ(leased_notices.count.load(), 1);
  EXPECT_EQ(watchdog_notices.count.load(), 1);
  EXPECT_EQ(long_lease->state(), LockState::kLost);
}

TEST_F(LivenessTest, ConfirmedHeartbeatsKeepATenMinuteLeaseHeld) {
  std::unique_ptr<LockClient> client = MustOpen(absl::Seconds(1));
  AcquireOptions leased{.lease = kTenMinutes};
  absl::StatusOr<Hold> hold = (*client->GetLock("kept"))->Acquire(leased);
  ASSERT_OK(hold);
  // A heartbeat every third of the TTL, for five TTLs.
  AdvanceWithHeartbeats(absl::Seconds(5), absl::Milliseconds(340));
  EXPECT_EQ(hold->state(), LockState::kHeld);
  EXPECT_OK(hold->Release());
  // Nothing held: no more heartbeats.
  const int sent = faults_->calls(FaultPlan::kLiveness);
  clock_->Advance(absl::Seconds(3));
  absl::SleepFor(kQuiet);
  EXPECT_EQ(faults_->calls(FaultPlan::kLiveness), sent);
}

TEST_F(LivenessTest, LivenessOffLeavesTheLeaseAlone) {
  std::unique_ptr<LockClient> client = MustOpen(absl::InfiniteDuration());
  AcquireOptions leased{.lease = kTenMinutes};
  absl::StatusOr<Hold> hold = (*client->GetLock("unwatched"))->Acquire(leased);
  ASSERT_OK(hold);
  clock_->Advance(absl::Minutes(5));
  absl::SleepFor(kQuiet);
  EXPECT_EQ(hold->state(), LockState::kHeld);
  EXPECT_EQ(faults_->calls(FaultPlan::kLiveness), 0);
}

TEST_F(LivenessTest, UriOptionSetsTheTtl) {
  // liveness_ttl=2s wins over the 1 s of the options: the first heartbeat
  // is due at 2/3 s, not 1/3 s.
  std::unique_ptr<LockClient> client =
      MustOpen(absl::Seconds(1), "?liveness_ttl=2s");
  absl::StatusOr<Hold> hold =
      (*client->GetLock("uri ttl"))->Acquire({.lease = kTenMinutes});
  ASSERT_OK(hold);
  clock_->Advance(absl::Milliseconds(500));
  absl::SleepFor(kQuiet);
  EXPECT_EQ(faults_->calls(FaultPlan::kLiveness), 0);
  clock_->Advance(absl::Milliseconds(200));
  EXPECT_TRUE(faults_->WaitForCalls(FaultPlan::kLiveness, 1, kReact));
}

TEST_F(LivenessTest, BadTtlsAreInvalidArguments) {
  absl::StatusOr<std::unique_ptr<LockClient>> zero = Open(absl::ZeroDuration());
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(zero.status().message()), HasSubstr("liveness_ttl"));
  absl::StatusOr<std::unique_ptr<LockClient>> tiny =
      Open(absl::Seconds(1), "?liveness_ttl=5ms");
  EXPECT_EQ(tiny.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tiny.status().message()), HasSubstr("liveness_ttl"));
  absl::StatusOr<std::unique_ptr<LockClient>> word =
      Open(absl::Seconds(1), "?liveness_ttl=soon");
  EXPECT_EQ(word.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<LockClient>> off =
      Open(absl::Seconds(1), "?liveness_ttl=off");
  EXPECT_OK(off);
}

}  // namespace
}  // namespace dlock
