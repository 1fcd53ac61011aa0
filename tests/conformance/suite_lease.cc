// Copyright dlock authors. Conformance: leases (C2) and watchdog renewal with
// lost notifications (C7).
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "conformance_fixture.h"
#include "server_process.h"

namespace dlock::test {
namespace {

TEST_P(Conformance, C2_LockExpiresWithoutRenewal) {
  // Long against a round trip; every bound below is relative to it.
  constexpr absl::Duration kLease = absl::Milliseconds(500);
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("expiring"));
  ASSERT_OK_AND_ASSIGN(auto contender, other->GetLock("expiring"));

  const absl::Time before_grant = absl::Now();
  // Kept, never released or renewed: only the lease ends it.
  ASSERT_OK_AND_ASSIGN(Hold first, held->Acquire(WithLease(kLease)));
  const absl::Time after_grant = absl::Now();
  // The other client waits with the default fallback poll: the lock frees
  // itself, with no release to announce it.
  AcquireOptions wait;
  wait.wait = kNoHang;
  wait.lease = kLongLease;
  BackgroundAcquire waiter(*contender, wait);

  // Nobody releases or renews; the lock must still be held for the lease...
  if (absl::Now() - after_grant < kLease / 2) {
    absl::StatusOr<Hold> tried = contender->TryAcquire();
    EXPECT_CODE(tried, kDeadlineExceeded);
    EXPECT_TRUE(IsHeldByAnother(tried.status())) << tried.status();
  }
  // ...and free within the lease plus a round trip.
  absl::Time freed;
  ASSERT_TRUE(Eventually(
      [&] {
        absl::StatusOr<LockInfo> info = holder->Admin().Inspect("expiring");
        freed = absl::Now();
        return info.ok() && info->owner != holder->CurrentOwner();
      },
      kLease + kNoHang))
      << "the lock outlived its lease";
  EXPECT_LE(freed - after_grant, kLease + kPromptly);

  ASSERT_TRUE(waiter.WaitDone(kNoHang));
  ASSERT_OK(waiter.result());
  EXPECT_GT(waiter.result()->fencing_token, first.fencing_token());
  EXPECT_GE(waiter.done_at() - before_grant, kLease - absl::Milliseconds(50))
      << "another owner got the lock before the lease ran out";
  // The waiter may sleep up to one fallback poll (1s) past the expiry.
  EXPECT_LE(waiter.done_at() - after_grant,
            kLease + ClientOptions().fallback_poll + kPromptly);

  // The former holder knows it without a round trip, and cannot release.
  EXPECT_EQ(first.state(), LockState::kLost);
  EXPECT_CODE(first.lost_reason(), kFailedPrecondition);
  EXPECT_TRUE(IsLost(first.lost_reason())) << first.lost_reason();
  EXPECT_CODE(first.Release(), kFailedPrecondition);
}

// A holder process that dies without releasing blocks others for at most its
// lease. The helper renews with the watchdog, so only its death frees the
// lock.
TEST_P(Conformance, C2_KilledHolderProcessBlocksAtMostItsLease) {
  ASSERT_TRUE(backend().shared_across_processes)
      << MissingCapability("shared_across_processes");
  constexpr absl::Duration kLease = absl::Seconds(1);
  const std::string holder_path = LockHolderPath();
  ASSERT_EQ(access(holder_path.c_str(), X_OK), 0)
      << holder_path << " is missing: build dlock_lock_holder, or set "
      << "DLOCK_LOCK_HOLDER";
  ASSERT_OK_AND_ASSIGN(std::string dir, MakeTempDir("dlock-holder"));
  absl::Cleanup remove_dir = [dir] { RemoveTree(dir); };
  const std::string log = dir + "/holder.log";

  ChildProcess holder;
  ASSERT_OK(
      holder.Spawn({holder_path, UriIn(ns()), "crashing holder",
                    absl::StrCat(absl::ToInt64Milliseconds(kLease), "ms")},
                   log));
  ASSERT_OK_AND_ASSIGN(const uint64_t child_token, HeldToken(log));

  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("crashing holder"));
  ASSERT_OK_AND_ASSIGN(LockInfo info,
                       client->Admin().Inspect("crashing holder"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.fencing_token, child_token);
  // Past its lease the living holder still has it: its watchdog renews.
  absl::SleepFor(kLease * 1.5);
  EXPECT_CODE(lock->TryAcquire(), kDeadlineExceeded);

  const absl::Time killed = absl::Now();
  holder.Kill();
  AcquireOptions wait;
  wait.wait = kNoHang + kLease;
  ASSERT_OK_AND_ASSIGN(Hold acquired, lock->Acquire(wait));
  // The lease, plus one fallback poll of the waiter, plus slack.
  EXPECT_LE(absl::Now() - killed,
            kLease + ClientOptions().fallback_poll + kPromptly);
  EXPECT_GT(acquired.fencing_token(), child_token);
  EXPECT_OK(acquired.Release());
}

// No lease given: the watchdog renews the hold for as long as it is held.
TEST_P(Conformance, C7_WatchdogKeepsLockPastThreeLeases) {
  ClientOptions options;
  options.watchdog_lease = kShortWatchdogLease;
  LostRecorder lost;
  options.on_lost = lost.Callback();
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(options));
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("renewed"));
  ASSERT_OK_AND_ASSIGN(auto contender, other->GetLock("renewed"));

  ASSERT_OK_AND_ASSIGN(Hold first, held->Acquire());
  absl::SleepFor(kShortWatchdogLease * 3.5);

  ASSERT_OK_AND_ASSIGN(LockInfo info, other->Admin().Inspect("renewed"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.owner, holder->CurrentOwner());
  EXPECT_EQ(info.fencing_token, first.fencing_token());
  EXPECT_GT(info.remaining_lease, absl::ZeroDuration());
  EXPECT_LE(info.remaining_lease, kShortWatchdogLease);
  EXPECT_CODE(contender->TryAcquire(), kDeadlineExceeded);
  EXPECT_EQ(first.state(), LockState::kHeld);
  EXPECT_TRUE(lost.Events().empty());

  // Release stops renewal: the lock stays free.
  ASSERT_OK(first.Release());
  absl::SleepFor(kShortWatchdogLease);
  ASSERT_OK_AND_ASSIGN(info, other->Admin().Inspect("renewed"));
  EXPECT_FALSE(info.locked);
  EXPECT_EQ(first.state(), LockState::kNotHeld);
  EXPECT_TRUE(lost.Events().empty());
}

// The number of threads of this process, from /proc.
int ThreadCount() {
  std::ifstream status("/proc/self/status");
  std::string line;
  int threads = -1;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "Threads:")) {
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &threads)) {
        return -1;
      }
    }
  }
  return threads;
}

// One renewal mechanism per client, not a thread per lock: many renewed
// holds add no threads, and each is kept alive.
TEST_P(Conformance, C7_OneRenewalMechanismRenewsEveryHold) {
  constexpr int kLocks = 40;
  ClientOptions options;
  options.watchdog_lease = kShortWatchdogLease;
  ASSERT_OK_AND_ASSIGN(auto client, NewClient(options));
  ASSERT_OK_AND_ASSIGN(auto observer, NewClient());
  std::vector<std::unique_ptr<DistributedLock>> locks;
  for (int i = 0; i < kLocks; ++i) {
    ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock(absl::StrCat("many-", i)));
    locks.push_back(std::move(lock));
  }
  std::vector<Hold> holds;
  // The first hold may start what a client starts lazily.
  ASSERT_OK_AND_ASSIGN(Hold first, locks[0]->Acquire());
  holds.push_back(std::move(first));
  const int threads_before = ThreadCount();
  ASSERT_GT(threads_before, 0);
  for (int i = 1; i < kLocks; ++i) {
    ASSERT_OK_AND_ASSIGN(Hold hold, locks[i]->Acquire());
    holds.push_back(std::move(hold));
  }
  EXPECT_LT(ThreadCount() - threads_before, kLocks / 4)
      << "a thread per renewed lock?";

  absl::SleepFor(kShortWatchdogLease * 2);
  for (int i = 0; i < kLocks; ++i) {
    ASSERT_OK_AND_ASSIGN(LockInfo info,
                         observer->Admin().Inspect(locks[i]->name()));
    EXPECT_EQ(info.owner, client->CurrentOwner()) << info.name;
    EXPECT_EQ(holds[i].state(), LockState::kHeld);
  }
  for (Hold& hold : holds) EXPECT_OK(hold.Release());
}

// A renewal that finds the lock held by another owner reports the hold lost
// (callback and state), exactly once, and leaves the new holder alone.
TEST_P(Conformance, C7_RenewalFindingAnotherHolderReportsLost) {
  ClientOptions options;
  options.watchdog_lease = kShortWatchdogLease;
  LostRecorder client_lost;
  options.on_lost = client_lost.Callback();
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(options));
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("taken over"));
  ASSERT_OK_AND_ASSIGN(auto taker, other->GetLock("taken over"));

  LostRecorder hold_lost;
  AcquireOptions watched;
  watched.on_lost = hold_lost.Callback();
  ASSERT_OK_AND_ASSIGN(Hold first, held->Acquire(watched));
  ASSERT_OK(other->Admin().ForceUnlock("taken over"));
  ASSERT_OK_AND_ASSIGN(Hold second, taker->TryAcquire(WithLease(kLongLease)));

  ASSERT_TRUE(hold_lost.WaitForEvents(1, kNoHang)) << "no lost callback";
  ASSERT_TRUE(client_lost.WaitForEvents(1, kNoHang)) << "no client callback";
  const LockLostEvent event = hold_lost.Events()[0];
  EXPECT_EQ(event.name, "taken over");
  EXPECT_EQ(event.owner, holder->CurrentOwner());
  EXPECT_EQ(event.fencing_token, first.fencing_token());
  EXPECT_FALSE(event.reason.ok());
  EXPECT_TRUE(IsLost(event.reason)) << event.reason;
  EXPECT_EQ(first.state(), LockState::kLost);
  EXPECT_CODE(first.lost_reason(), kFailedPrecondition);

  // Reported once, and the watchdog stops renewing it.
  absl::SleepFor(kShortWatchdogLease);
  EXPECT_EQ(hold_lost.Events().size(), 1u);
  EXPECT_EQ(client_lost.Events().size(), 1u);
  // (Renew first: a Release empties the Hold.)
  EXPECT_CODE(first.Renew(), kFailedPrecondition);
  EXPECT_CODE(first.Release(), kFailedPrecondition);

  ASSERT_OK_AND_ASSIGN(LockInfo info, other->Admin().Inspect("taken over"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.owner, other->CurrentOwner());
  EXPECT_EQ(info.fencing_token, second.fencing_token());
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_GT(info.remaining_lease, kLongLease - absl::Seconds(10));
  EXPECT_OK(second.Release());
}

}  // namespace
}  // namespace dlock::test
