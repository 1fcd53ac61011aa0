// Copyright dlock authors. Conformance: a hold released with
// Hold::ReleaseAndKeepFor() leaves the lock taken by nobody until the keep
// ends on the backend's clock (ShedLock's lockAtLeastFor), whatever becomes
// of the releasing client or process, and however its release got through
// (C21).
#include <memory>
#include <string>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "conformance_fixture.h"
#include "fault_backend.h"
#include "server_process.h"

namespace dlock::test {
namespace {

// Short, to keep the suite fast; long against a round trip: what must fit
// in it (a Close, two tries and an Inspect) took 120 ms at most on a loaded
// 2-core machine, client setup included.
constexpr absl::Duration kKeep = absl::Seconds(1);
// A grant may come this much before the keep is over as measured here:
// the backends' clocks count whole milliseconds.
constexpr absl::Duration kClockGrain = absl::Milliseconds(50);

// Waits for `lock` to be granted to a new owner (polling with tries, so
// that no wake-up is involved) and returns when it was.
absl::StatusOr<Hold> TryUntilGranted(DistributedLock& lock,
                                     absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<Hold> hold = lock.TryAcquire(WithLease(kLongLease));
    if (hold.ok() || !IsHeldByAnother(hold.status()) ||
        absl::Now() >= deadline) {
      return hold;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

// Two clients, each with a handle on one lock: the holder's and another.
struct TwoClients {
  std::unique_ptr<LockClient> holder;
  std::unique_ptr<LockClient> other;
  std::unique_ptr<DistributedLock> held;
  std::unique_ptr<DistributedLock> contender;
};
absl::StatusOr<TwoClients> OnTwoClients(
    absl::StatusOr<std::unique_ptr<LockClient>> holder,
    absl::StatusOr<std::unique_ptr<LockClient>> other, absl::string_view name) {
  if (!holder.ok()) return holder.status();
  if (!other.ok()) return other.status();
  TwoClients two{.holder = *std::move(holder), .other = *std::move(other)};
  absl::StatusOr<std::unique_ptr<DistributedLock>> held =
      two.holder->GetLock(name);
  if (!held.ok()) return held.status();
  absl::StatusOr<std::unique_ptr<DistributedLock>> contender =
      two.other->GetLock(name);
  if (!contender.ok()) return contender.status();
  two.held = *std::move(held);
  two.contender = *std::move(contender);
  return two;
}

// How a lock kept for at most `keep` looks from any client.
void ExpectKept(LockClient& client, absl::string_view name,
                uint64_t released_token, absl::Duration keep = kKeep) {
  ASSERT_OK_AND_ASSIGN(LockInfo info, client.Admin().Inspect(name));
  EXPECT_TRUE(info.locked);
  EXPECT_TRUE(info.kept_after_release);
  EXPECT_EQ(info.owner, "");
  EXPECT_GT(info.remaining_lease, absl::ZeroDuration());
  EXPECT_LE(info.remaining_lease, keep + kClockGrain);
  // Backends that keep the released hold's token report it.
  if (info.fencing_token != 0) {
    EXPECT_EQ(info.fencing_token, released_token);
  }
}

TEST_P(Conformance, Keep_RefusesEveryOwnerUntilItEndsThenTokenGrows) {
  ASSERT_OK_AND_ASSIGN(TwoClients two,
                       OnTwoClients(NewClient(), NewClient(), "kept"));
  auto& [holder, other, held, contender] = two;

  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire());
  const uint64_t token = hold.fencing_token();
  const absl::Time released = absl::Now();
  ASSERT_OK(hold.ReleaseAndKeepFor(kKeep));
  EXPECT_FALSE(hold.active());

  // Nobody's: not another owner's, and not the releasing owner's either.
  absl::StatusOr<Hold> refused = contender->TryAcquire();
  EXPECT_TRUE(IsHeldByAnother(refused.status())) << refused.status();
  refused = held->TryAcquire();
  EXPECT_TRUE(IsHeldByAnother(refused.status())) << refused.status();
  ExpectKept(*other, "kept", token);

  ASSERT_OK_AND_ASSIGN(Hold next, TryUntilGranted(*contender, kKeep + kNoHang));
  EXPECT_GE(absl::Now() - released, kKeep - kClockGrain)
      << "granted before the keep was over";
  EXPECT_GT(next.fencing_token(), token);
  ASSERT_OK_AND_ASSIGN(LockInfo info, other->Admin().Inspect("kept"));
  EXPECT_FALSE(info.kept_after_release);
  EXPECT_EQ(info.owner, other->CurrentOwner());
  EXPECT_OK(next.Release());
}

TEST_P(Conformance, Keep_ListedAsKeptWithNoOwner) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("listed-kept"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire());
  ASSERT_OK(hold.ReleaseAndKeepFor(kKeep));
  if (!client->traits().can_list) {
    EXPECT_CODE(client->Admin().List("").status(), kUnimplemented);
    return;
  }
  ASSERT_OK_AND_ASSIGN(std::vector<LockInfo> listed, client->Admin().List(""));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].name, "listed-kept");
  EXPECT_TRUE(listed[0].locked);
  EXPECT_TRUE(listed[0].kept_after_release);
  EXPECT_EQ(listed[0].owner, "");
}

TEST_P(Conformance, Keep_CloseOfTheReleasingClientLeavesItKept) {
  ASSERT_OK_AND_ASSIGN(TwoClients two, OnTwoClients(NewClient(), NewClient(),
                                                    "kept-past-close"));
  auto& [holder, other, held, contender] = two;
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire());
  const uint64_t token = hold.fencing_token();
  ASSERT_OK(hold.ReleaseAndKeepFor(kKeep));
  ASSERT_OK(holder->Close());

  absl::StatusOr<Hold> refused = contender->TryAcquire();
  EXPECT_TRUE(IsHeldByAnother(refused.status())) << refused.status();
  ExpectKept(*other, "kept-past-close", token);
}

// C9: the kept lock ends without any release to announce it; a waiter is
// woken then, long before its fallback poll.
TEST_P(Conformance, Keep_WaiterWokenWhenItEnds) {
  ASSERT_OK_AND_ASSIGN(
      TwoClients two,
      OnTwoClients(NewClient(), NewClient(SlowPollOptions()), "kept-waited"));
  auto& [holder, other, held, contender] = two;
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire());

  AcquireOptions wait;
  wait.wait = kNoHang + kSlowFallbackPoll;
  BackgroundAcquire waiter(*contender, wait);
  absl::SleepFor(kLetWaiterBlock);
  ASSERT_FALSE(waiter.done());
  const absl::Time released = absl::Now();
  ASSERT_OK(hold.ReleaseAndKeepFor(kKeep));

  ASSERT_TRUE(waiter.WaitDone(kKeep + kSlowFallbackPoll + kNoHang));
  ASSERT_OK(waiter.result());
  EXPECT_GE(waiter.done_at() - released, kKeep - kClockGrain);
  // Woken at the end of the keep, not by a fallback poll (5s).
  EXPECT_LE(waiter.done_at() - released, kKeep + kPromptly);
}

TEST_P(Conformance, Keep_ForceUnlockEndsIt) {
  ASSERT_OK_AND_ASSIGN(TwoClients two,
                       OnTwoClients(NewClient(), NewClient(), "kept-forced"));
  auto& [holder, other, held, contender] = two;
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire());
  const uint64_t token = hold.fencing_token();
  ASSERT_OK(hold.ReleaseAndKeepFor(absl::Seconds(60)));

  ASSERT_OK(other->Admin().ForceUnlock("kept-forced"));
  ASSERT_OK_AND_ASSIGN(LockInfo info, other->Admin().Inspect("kept-forced"));
  EXPECT_FALSE(info.locked);
  ASSERT_OK_AND_ASSIGN(Hold next, contender->TryAcquire());
  EXPECT_GT(next.fencing_token(), token);
  EXPECT_OK(next.Release());
}

TEST_P(Conformance, Keep_ForceUnlockOnItsTokenEndsIt) {
  // The token Inspect reports for a kept lock is the one a conditional
  // force unlock takes (C12): another token leaves it kept.
  ASSERT_OK_AND_ASSIGN(TwoClients two, OnTwoClients(NewClient(), NewClient(),
                                                    "kept-forced-on-token"));
  auto& [holder, other, held, contender] = two;
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire());
  ASSERT_OK(hold.ReleaseAndKeepFor(absl::Seconds(60)));
  ASSERT_OK_AND_ASSIGN(LockInfo kept,
                       other->Admin().Inspect("kept-forced-on-token"));
  ASSERT_TRUE(kept.kept_after_release);
  EXPECT_EQ(other->Admin()
                .ForceUnlock("kept-forced-on-token", kept.fencing_token + 1)
                .code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_OK(
      other->Admin().ForceUnlock("kept-forced-on-token", kept.fencing_token));
  ASSERT_OK_AND_ASSIGN(Hold next, contender->TryAcquire());
  EXPECT_OK(next.Release());
}

TEST_P(Conformance, Keep_ZeroIsAPlainRelease) {
  ASSERT_OK_AND_ASSIGN(TwoClients two,
                       OnTwoClients(NewClient(), NewClient(), "kept-zero"));
  auto& [holder, other, held, contender] = two;
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire());
  ASSERT_OK(hold.ReleaseAndKeepFor(absl::ZeroDuration()));
  EXPECT_FALSE(hold.active());
  ASSERT_OK_AND_ASSIGN(Hold next, contender->TryAcquire());
  EXPECT_OK(next.Release());
}

TEST_P(Conformance, Keep_BadDurationChangesNothing) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("kept-bad"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire());
  for (absl::Duration bad :
       {absl::Seconds(-1), absl::Milliseconds(1), absl::InfiniteDuration()}) {
    EXPECT_CODE(hold.ReleaseAndKeepFor(bad), kInvalidArgument) << bad;
    EXPECT_TRUE(hold.active());
  }
  ASSERT_OK_AND_ASSIGN(LockInfo info, client->Admin().Inspect("kept-bad"));
  EXPECT_EQ(info.owner, client->CurrentOwner());
  EXPECT_OK(hold.Release());
}

// C5: keeping the lock is for the owner's last hold; with others standing
// the call is refused and changes nothing.
TEST_P(Conformance, Keep_RefusedWhileOtherAcquisitionsStand) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("kept-reentered"));
  ASSERT_OK_AND_ASSIGN(auto contender, other->GetLock("kept-reentered"));
  ASSERT_OK_AND_ASSIGN(Hold outer, lock->Acquire());
  ASSERT_OK_AND_ASSIGN(Hold inner, lock->Acquire());
  ASSERT_EQ(inner.hold_count(), 2);

  absl::Status refused = inner.ReleaseAndKeepFor(kKeep);
  EXPECT_CODE(refused, kFailedPrecondition);
  // A kind of its own, so that nobody tests for the absence of one.
  EXPECT_EQ(ErrorKindOf(refused), ErrorKind::kAcquisitionsStanding) << refused;
  EXPECT_TRUE(inner.active());
  EXPECT_EQ(inner.state(), LockState::kHeld);
  ASSERT_OK_AND_ASSIGN(LockInfo info, other->Admin().Inspect("kept-reentered"));
  EXPECT_EQ(info.owner, client->CurrentOwner());
  EXPECT_EQ(info.hold_count, 2);

  // The last one keeps it.
  ASSERT_OK(outer.Release());
  ASSERT_OK(inner.ReleaseAndKeepFor(kKeep));
  absl::StatusOr<Hold> kept = contender->TryAcquire();
  EXPECT_TRUE(IsHeldByAnother(kept.status())) << kept.status();
  ExpectKept(*other, "kept-reentered", outer.fencing_token());
}

// A hold lost before the call keeps nothing: the lock is free, or the new
// owner's, as it was.
TEST_P(Conformance, Keep_LostHoldIsLostAndKeepsNothing) {
  ASSERT_OK_AND_ASSIGN(TwoClients two,
                       OnTwoClients(NewClient(), NewClient(), "kept-lost"));
  auto& [holder, other, held, contender] = two;

  ASSERT_OK_AND_ASSIGN(Hold expired,
                       held->Acquire(WithLease(absl::Milliseconds(300))));
  ASSERT_OK_AND_ASSIGN(Hold taken,
                       contender->Acquire(WithLease(kLongLease, kNoHang)));
  absl::Status lost = expired.ReleaseAndKeepFor(kKeep);
  EXPECT_TRUE(IsLost(lost)) << lost;
  ASSERT_OK_AND_ASSIGN(LockInfo info, other->Admin().Inspect("kept-lost"));
  EXPECT_FALSE(info.kept_after_release);
  EXPECT_EQ(info.owner, other->CurrentOwner());
  EXPECT_EQ(taken.state(), LockState::kHeld);
  ASSERT_OK(taken.Release());

  // Lost with nobody else taking it: free at once afterwards.
  ASSERT_OK_AND_ASSIGN(Hold again,
                       held->Acquire(WithLease(absl::Milliseconds(300))));
  absl::SleepFor(absl::Milliseconds(500));
  lost = again.ReleaseAndKeepFor(kKeep);
  EXPECT_TRUE(IsLost(lost)) << lost;
  ASSERT_OK_AND_ASSIGN(Hold free,
                       contender->Acquire(WithLease(kLongLease, kPromptly)));
  ASSERT_OK_AND_ASSIGN(info, other->Admin().Inspect("kept-lost"));
  EXPECT_FALSE(info.kept_after_release);
  EXPECT_OK(free.Release());
}

// C21: a release with keep whose outcome is unknown is retried with what is
// left of the keep: the lock is neither freed early (by a retry that would
// forget the keep) nor held to the end of the hold's lease (60s).
TEST_P(Conformance, Keep_UnconfirmedReleaseRetriedWithTheKeep) {
  // Longer than the core's retry period (1s for this lease), so that the
  // retry keeps the lock for a while.
  constexpr absl::Duration kRetryKeep = absl::Seconds(3);
  // The two ways a release's outcome is unknown, each on its own lock and
  // clients, side by side: each waits out its keep, which needs no CPU.
  auto unconfirmed = [&](const bool reached_server) {
    SCOPED_TRACE(reached_server ? "reply lost" : "request lost");
    const std::string name = absl::StrCat("kept-retried-", reached_server);
    auto faults = std::make_shared<FaultPlan>();
    ClientOptions options;
    options.backend_decorator = faults->Decorator();
    ASSERT_OK_AND_ASSIGN(auto holder, NewClient(options));
    ASSERT_OK_AND_ASSIGN(auto other, NewClient());
    ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock(name));
    ASSERT_OK_AND_ASSIGN(auto contender, other->GetLock(name));
    ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire(WithLease(kLongLease)));
    const uint64_t token = hold.fencing_token();

    faults->Set(FaultPlan::kRelease, {.fail_before = !reached_server,
                                      .fail_after = reached_server,
                                      .times = 1});
    const absl::Time released = absl::Now();
    EXPECT_CODE(hold.ReleaseAndKeepFor(kRetryKeep), kUnavailable);
    EXPECT_FALSE(hold.active());
    // The background retry gets it through, or finds it done.
    ASSERT_TRUE(faults->WaitForCalls(FaultPlan::kRelease, 2, kNoHang));
    ASSERT_TRUE(Eventually(
        [&] {
          absl::StatusOr<LockInfo> info = other->Admin().Inspect(name);
          return info.ok() && info->kept_after_release;
        },
        kRetryKeep))
        << "the retried release did not keep the lock";
    ExpectKept(*other, name, token, kRetryKeep);

    ASSERT_OK_AND_ASSIGN(Hold next,
                         TryUntilGranted(*contender, kRetryKeep + kNoHang));
    const absl::Duration took = absl::Now() - released;
    EXPECT_GE(took, kRetryKeep - kClockGrain)
        << "freed before the keep was over";
    EXPECT_LE(took, kRetryKeep + kNoHang) << "held to the lease's end";
    EXPECT_GT(next.fencing_token(), token);
    EXPECT_OK(next.Release());
  };
  std::thread request_lost(unconfirmed, false);
  unconfirmed(true);
  request_lost.join();
}

// A process that releases keeping the lock and exits at once leaves it kept
// for the keep after its exit: what a job run from cron needs.
TEST_P(Conformance, Keep_OutlivesTheReleasingProcess) {
  ASSERT_TRUE(backend().shared_across_processes)
      << MissingCapability("shared_across_processes");
  constexpr absl::Duration kProcessKeep = absl::Seconds(2);
  const std::string holder_path = LockHolderPath();
  ASSERT_EQ(access(holder_path.c_str(), X_OK), 0)
      << holder_path << " is missing: build dlock_lock_holder, or set "
      << "DLOCK_LOCK_HOLDER";
  ASSERT_OK_AND_ASSIGN(std::string dir, MakeTempDir("dlock-keeper"));
  absl::Cleanup remove_dir = [dir] { RemoveTree(dir); };
  const std::string log = dir + "/keeper.log";

  ChildProcess keeper;
  ASSERT_OK(keeper.Spawn(
      {holder_path, UriIn(ns()), "cron job", "30s",
       absl::StrCat(absl::ToInt64Milliseconds(kProcessKeep), "ms")},
      log));
  ASSERT_OK(WaitUntil([&] { return !keeper.Running(); }, kNoHang,
                      "the keeping process to exit", log));
  const absl::Time exited = absl::Now();
  const std::string out = FileTail(log);
  // "HELD <token>" and "KEEPING <unix micros just before the release>".
  auto number_after = [&](const std::string& tag, int64_t& value) {
    const size_t at = out.find(tag);
    if (at == std::string::npos) return false;
    absl::string_view rest = absl::string_view(out).substr(at + tag.size());
    return absl::SimpleAtoi(rest.substr(0, rest.find('\n')), &value);
  };
  int64_t child_token = 0;
  int64_t keeping_micros = 0;
  ASSERT_TRUE(number_after("HELD ", child_token)) << out;
  ASSERT_TRUE(number_after("KEEPING ", keeping_micros)) << out;
  ASSERT_NE(out.find("KEPT"), std::string::npos) << out;
  // The lock is kept until at least here.
  const absl::Time kept_until =
      absl::FromUnixMicros(keeping_micros) + kProcessKeep;

  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("cron job"));
  absl::StatusOr<Hold> refused = lock->TryAcquire();
  const absl::Time tried = absl::Now();
  ASSERT_LT(tried, kept_until - kClockGrain)
      << "the child took so long to exit that the keep proves nothing";
  EXPECT_TRUE(IsHeldByAnother(refused.status()))
      << "free " << absl::FormatDuration(tried - exited)
      << " after the releasing process exited: " << refused.status();
  ASSERT_OK_AND_ASSIGN(LockInfo info, client->Admin().Inspect("cron job"));
  EXPECT_TRUE(info.kept_after_release);

  ASSERT_OK_AND_ASSIGN(Hold next,
                       TryUntilGranted(*lock, kProcessKeep + kNoHang));
  EXPECT_GE(absl::Now(), kept_until - kClockGrain)
      << "granted before the keep was over";
  EXPECT_LE(absl::Now() - exited, kProcessKeep + kNoHang);
  EXPECT_GT(next.fencing_token(), static_cast<uint64_t>(child_token));
  EXPECT_OK(next.Release());
}

}  // namespace
}  // namespace dlock::test
