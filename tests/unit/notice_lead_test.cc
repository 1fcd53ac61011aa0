// Copyright dlock authors. A notifier thread the scheduler runs late (C20):
// on an injected clock that plays the scheduler, every time a client's
// thread planned to look comes, the clock first moves on by a delay, and
// only then does the thread run. A hold whose lease ends must still be told
// lost before the moment the server may grant it to another: the lease's end
// as the server counts it (memory://, whose "server" counts on the same
// clock, from its grant, which is the send time on a clock that stands still
// while the test acquires).
#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dlock/client.h"
#include "dlock/clock.h"
#include "dlock/rw_lock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

// Long enough for another thread to act on a clock move; a wait that ends
// on the event returns at once.
constexpr absl::Duration kReact = absl::Seconds(5);
// How long a test looks for something that must not happen.
constexpr absl::Duration kQuiet = absl::Milliseconds(150);
// The lease of each hold, and how late the scheduler runs a thread after
// the moment it planned to wake: more than the drift margin (12 ms) and the
// notifier's fixed lead (20 ms) together.
constexpr absl::Duration kLease = absl::Seconds(1);
constexpr absl::Duration kLate = absl::Milliseconds(40);
// Holds in a row. The first one's notice may come late: no client can know
// that the scheduler runs it late before it has been run late once.
constexpr int kRounds = 5;

// A ManualClock that shows the timed waits in progress, so that the test
// can play the scheduler: it moves time to the moment a waiting thread
// planned to look, plus the delay, before that thread runs at all.
class SchedulerClock : public Clock {
 public:
  MonoTime Now() const override { return inner_.Now(); }
  bool WaitUntil(std::condition_variable& cv,
                 std::unique_lock<std::mutex>& lock, MonoTime deadline,
                 absl::FunctionRef<bool()> ready) const override {
    {
      absl::MutexLock l(&mu_);
      planned_.insert(deadline);
    }
    const bool result = inner_.WaitUntil(cv, lock, deadline, ready);
    absl::MutexLock l(&mu_);
    planned_.erase(planned_.find(deadline));
    return result;
  }

  // The earliest moment still ahead at which a waiting thread planned to
  // look, once there is one (waited for in real time, up to kReact).
  std::optional<MonoTime> NextPlannedLook() const {
    const absl::Time give_up = absl::Now() + kReact;
    do {
      {
        absl::MutexLock l(&mu_);
        const MonoTime now = inner_.Now();
        for (MonoTime at : planned_) {
          if (at > now && !at.is_infinite_future()) return at;
        }
      }
      absl::SleepFor(absl::Milliseconds(1));
    } while (absl::Now() < give_up);
    return std::nullopt;
  }

  void AdvanceTo(MonoTime at) { inner_.Advance(at - Now()); }

 private:
  ManualClock inner_;
  mutable absl::Mutex mu_;
  mutable std::multiset<MonoTime> planned_ ABSL_GUARDED_BY(mu_);
};

// One hold's notice: when (on the clock) and how often it came.
struct Notice {
  absl::Notification told;
  absl::Mutex mu;
  MonoTime at ABSL_GUARDED_BY(mu) = MonoTime::InfiniteFuture();
  int count ABSL_GUARDED_BY(mu) = 0;
};

using AcquireFn = absl::AnyInvocable<absl::StatusOr<Hold>(AcquireOptions)>;
using HeldFn = absl::AnyInvocable<bool()>;

// Whether `held` says no within kReact (real time: the client's threads
// act on a clock move in their own time).
bool FreeSoon(HeldFn& held) {
  const absl::Time give_up = absl::Now() + kReact;
  while (absl::Now() < give_up) {
    if (!held()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

class NoticeLeadTest : public ::testing::Test {
 protected:
  std::unique_ptr<LockClient> Connect() {
    static std::atomic<int> n{0};
    ClientOptions options;
    options.clock = clock_;
    absl::StatusOr<std::unique_ptr<LockClient>> client = dlock::Connect(
        absl::StrCat("memory://notice-lead-", getpid(), "-", n++), options);
    EXPECT_OK(client);
    return *std::move(client);
  }

  // Holds acquired by `acquire` in a row, each left to its lease, with the
  // notifier run kLate after every moment it planned: from the second on,
  // each is told before its lease ends on the server, and telling it sooner
  // does not free the lock there sooner (`held` asks the server).
  void EachToldBeforeTheLeaseEnds(AcquireFn acquire, HeldFn held) {
    for (int round = 0; round < kRounds; ++round) {
      SCOPED_TRACE(absl::StrCat("hold ", round));
      Notice notice;
      AcquireOptions options;
      options.lease = kLease;
      options.on_lost = [&](const LockLostEvent&) {
        absl::MutexLock lock(&notice.mu);
        notice.at = std::min(notice.at, clock_->Now());
        ++notice.count;
        notice.told.Notify();
      };
      const MonoTime sent = clock_->Now();
      absl::StatusOr<Hold> hold = acquire(options);
      ASSERT_OK(hold);
      // The only look planned now is the notifier's, for this hold.
      std::optional<MonoTime> planned = clock_->NextPlannedLook();
      ASSERT_TRUE(planned.has_value()) << "the notifier planned no look";
      ASSERT_LT(*planned, sent + kLease);
      clock_->AdvanceTo(*planned + kLate);
      ASSERT_TRUE(notice.told.WaitForNotificationWithTimeout(kReact));
      {
        absl::MutexLock lock(&notice.mu);
        EXPECT_EQ(notice.count, 1);
        if (round > 0) {
          EXPECT_LE(notice.at - sent, kLease)
              << "told after the server may grant the lock to another";
        }
      }
      if (round > 0) {
        absl::SleepFor(kQuiet);
        EXPECT_TRUE(held()) << "freed on the server before its lease ended";
      }
      // The lease's end: the server frees it (and what the client had left
      // to release there is released by then).
      clock_->AdvanceTo(std::max(clock_->Now(), sent + kLease));
      EXPECT_TRUE(FreeSoon(held)) << "still held after its lease";
    }
  }

  std::shared_ptr<SchedulerClock> clock_ = std::make_shared<SchedulerClock>();
};

TEST_F(NoticeLeadTest, ALateNotifierStillTellsAMutexHoldBeforeItsLeaseEnds) {
  std::unique_ptr<LockClient> client = Connect();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> lock,
                       client->GetLock("mutex"));
  EachToldBeforeTheLeaseEnds(
      [&](AcquireOptions options) { return lock->Acquire(options); },
      [&] { return client->Admin().Inspect("mutex")->locked; });
}

TEST_F(NoticeLeadTest, ALateNotifierStillTellsAReaderBeforeItsLeaseEnds) {
  std::unique_ptr<LockClient> client = Connect();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ReadWriteLock> rw,
                       client->GetReadWriteLock("rw"));
  EachToldBeforeTheLeaseEnds(
      [&](AcquireOptions options) { return rw->AcquireRead(options); },
      [&] { return !rw->Inspect()->holders.empty(); });
}

}  // namespace
}  // namespace dlock
