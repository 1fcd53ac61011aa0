// Redlock holder liveness (docs/redis.md, "Redlock and holder liveness"):
// what the client counts per master (LivenessChains, RedlockHold), and on
// real masters that a hold lives on while enough of its own masters keep its
// holder's key, so that one master down costs nothing, while refreshes that
// reach a majority other than the hold's masters end it before a waiter wins
// (C19).
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "fault_proxy.h"
#include "gtest/gtest.h"
#include "redis_server.h"
#include "redlock_hold.h"
#include "status_testing.h"
#include "tests/redlock_test_util.h"

namespace dlock {
namespace {

using ::dlock::redis::KeyWrite;
using ::dlock::redis::LivenessChains;
using ::dlock::redis::RedlockHold;
using ::dlock::test::Admission;
using ::dlock::test::FaultProxy;
using ::dlock::test::RedisGroup;
using ::dlock::test::StartGroup;
using ::dlock::test::StartProxies;

MonoTime At(int ms) {
  return MonoTime::FromSinceOrigin(absl::Milliseconds(1000000 + ms));
}

// No drift, so that the ends below are plain sums.
constexpr redis::Drift kNoDrift{.factor = 0, .floor = absl::ZeroDuration()};
constexpr absl::Duration kUnitTtl = absl::Milliseconds(1000);

TEST(LivenessChains, WritesWithinTheChainExtendIt) {
  LivenessChains chains(3, kUnitTtl, kNoDrift);
  const uint64_t chain = chains.Confirm(0, KeyWrite{At(0), At(10)});
  ASSERT_NE(chain, 0u);
  EXPECT_EQ(chains.LiveUntil(0, chain), At(1000));
  // Sent at 300, in by 900 (< 1000): ran while the key lived.
  EXPECT_EQ(chains.Confirm(0, KeyWrite{At(300), At(900)}), chain);
  EXPECT_EQ(chains.LiveUntil(0, chain), At(1300));
  // A reply counted late changes nothing it should not.
  EXPECT_EQ(chains.Confirm(0, KeyWrite{At(100), At(200)}), chain);
  EXPECT_EQ(chains.LiveUntil(0, chain), At(1300));
  // Other masters have chains of their own.
  EXPECT_EQ(chains.LiveUntil(1, chain), MonoTime::InfinitePast());
}

TEST(LivenessChains, AReplyAfterTheEndStartsANewChainAndEndsTheOld) {
  LivenessChains chains(3, kUnitTtl, kNoDrift);
  const uint64_t first = chains.Confirm(1, KeyWrite{At(0), At(10)});
  // Sent in time, but its reply came after 1000: it may have run after the
  // key expired, and a waiter may have taken holds over in between.
  const uint64_t second = chains.Confirm(1, KeyWrite{At(600), At(1100)});
  ASSERT_NE(second, 0u);
  EXPECT_NE(second, first);
  EXPECT_EQ(chains.LiveUntil(1, first), MonoTime::InfinitePast());
  EXPECT_EQ(chains.LiveUntil(1, second), At(1600));
  // A write older than the new chain joins nothing.
  EXPECT_EQ(chains.Confirm(1, KeyWrite{At(20), At(30)}), 0u);
  // A reply in after the end its own send time vouches for: nothing.
  EXPECT_EQ(chains.Confirm(1, KeyWrite{At(1500), At(2600)}), 0u);
  EXPECT_EQ(chains.LiveUntil(1, second), At(1600));
}

TEST(RedlockHold, LivesUntilTooFewOfItsMastersKeepIt) {
  // Five masters, quorum 3: a hold blocks every other quorum while it lives
  // on 3 masters.
  LivenessChains chains(5, kUnitTtl, kNoDrift);
  RedlockHold hold(7, At(600000), 5);
  for (size_t m = 0; m < 3; ++m) {
    hold.Granted(m, At(600000), chains.Confirm(m, KeyWrite{At(0), At(5)}),
                 /*fresh_there=*/true);
  }
  EXPECT_EQ(hold.BlockingUntil(chains, 3), At(1000));
  // Refreshes on masters 1..4: two of them never granted the hold, so they
  // keep nothing; master 0 alone lags, and ends the hold.
  for (size_t m = 1; m < 5; ++m) chains.Confirm(m, KeyWrite{At(400), At(410)});
  EXPECT_EQ(hold.BlockingUntil(chains, 3), At(1000));
  chains.Confirm(0, KeyWrite{At(400), At(410)});
  EXPECT_EQ(hold.BlockingUntil(chains, 3), At(1400));
  // A master where the owner is gone counts no more.
  hold.GoneFrom(2);
  EXPECT_EQ(hold.BlockingUntil(chains, 3), MonoTime::InfinitePast());
}

TEST(RedlockHold, TheLeaseOnEachMasterBoundsItToo) {
  LivenessChains chains(3, absl::Seconds(10), kNoDrift);
  RedlockHold hold(1, At(2000), 3);
  for (size_t m = 0; m < 3; ++m) {
    hold.Granted(m, At(2000 + static_cast<int>(m) * 100),
                 chains.Confirm(m, KeyWrite{At(0), At(5)}), true);
  }
  EXPECT_EQ(hold.BlockingUntil(chains, 2), At(2100));
  hold.Renewed(0, At(5000));
  EXPECT_EQ(hold.BlockingUntil(chains, 2), At(2200));
  // A fresh key on a master (the hold was gone there) keeps none of the
  // longer lease the old key had.
  hold.Renewed(1, At(9000));
  hold.Granted(1, At(3000), chains.Confirm(1, KeyWrite{At(10), At(20)}), true);
  EXPECT_EQ(hold.BlockingUntil(chains, 2), At(3000));
}

// --- On real masters ---------------------------------------------------------

constexpr absl::Duration kTtl = absl::Seconds(2);

std::string Uri(const RedisGroup& group, absl::string_view ns,
                const std::vector<int>& ports = {}) {
  return absl::StrCat("redlock://", group.Hosts(ports), "?namespace=", ns,
                      "&liveness_ttl=", absl::FormatDuration(kTtl),
                      "&operation_timeout=300ms");
}

// Whether the server has a key matching `pattern` (KEYS: a test's data).
bool HasKey(test::RedisServer& server, const std::string& pattern) {
  absl::StatusOr<std::string> reply = server.RawCommand({"KEYS", pattern});
  EXPECT_OK(reply);
  return reply.ok() && reply->rfind("*0\r\n", 0) != 0;
}

// How many GETs the server ran (INFO commandstats), scripts' included.
int64_t GetCalls(test::RedisServer& server) {
  absl::StatusOr<std::string> reply =
      server.RawCommand({"INFO", "commandstats"});
  EXPECT_OK(reply);
  if (!reply.ok()) return -1;
  const size_t at = reply->find("cmdstat_get:calls=");
  if (at == std::string::npos) return 0;
  return std::strtoll(reply->c_str() + at + 18, nullptr, 10);
}

// With one master of three down, a live holder's hold lives on the other
// two: kept across several TTLs, and no waiter gets it.
TEST(RedlockLiveness, OneMasterDownKeepsALiveHoldersHold) {
  std::unique_ptr<RedisGroup> group = StartGroup(3);
  ASSERT_NE(group, nullptr);
  ASSERT_OK_AND_ASSIGN(auto holder, Connect(Uri(*group, "onedown")));
  ASSERT_OK_AND_ASSIGN(auto waiter, Connect(Uri(*group, "onedown")));
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("job"));
  ASSERT_OK_AND_ASSIGN(auto wanted, waiter->GetLock("job"));
  ASSERT_OK_AND_ASSIGN(Hold hold,
                       held->TryAcquire({.lease = absl::Minutes(10)}));
  group->server(0).StopServer();
  for (int i = 0; i < 4; ++i) {
    absl::SleepFor(kTtl);
    EXPECT_EQ(hold.state(), LockState::kHeld) << "after " << i + 1 << " TTLs";
    EXPECT_EQ(wanted->TryAcquire().status().code(),
              absl::StatusCode::kDeadlineExceeded);
  }
  ASSERT_OK_AND_ASSIGN(LockInfo info, waiter->Admin().Inspect("job"));
  EXPECT_EQ(info.holder_live, std::optional<bool>(true));
  EXPECT_OK(hold.Release());
  ASSERT_OK_AND_ASSIGN(Hold next, wanted->TryAcquire());
  EXPECT_OK(next.Release());
}

// The hold is granted on masters 1 and 2 (3 is away); then master 3 comes
// back and master 1 is cut off from the holder, so that every refresh is
// confirmed by a majority, {2, 3}, which is not the hold's. A waiter wins
// {1, 3} once the holder's key on master 1 lapses: the holder must have
// been told before (C19).
TEST(RedlockLiveness, RefreshesMissingTheHoldsMastersEndItBeforeAWaiterWins) {
  std::unique_ptr<RedisGroup> group = StartGroup(3);
  ASSERT_NE(group, nullptr);
  FaultProxy proxies[3];
  const std::vector<int> ports = StartProxies(*group, proxies);
  ASSERT_OK_AND_ASSIGN(auto holder, Connect(Uri(*group, "moved", ports)));
  ASSERT_OK_AND_ASSIGN(auto waiter, Connect(Uri(*group, "moved")));
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("job"));
  ASSERT_OK_AND_ASSIGN(auto wanted, waiter->GetLock("job"));

  ASSERT_OK(proxies[2].SetAdmission(Admission::kRefuse));
  proxies[2].ResetAll();
  std::atomic<bool> told{false};
  ASSERT_OK_AND_ASSIGN(
      Hold hold, held->TryAcquire(
                     {.lease = absl::Minutes(10),
                      .on_lost = [&](const LockLostEvent&) { told = true; }}));
  EXPECT_TRUE(HasKey(group->server(0), "dlock:{moved:job}"));
  EXPECT_TRUE(HasKey(group->server(1), "dlock:{moved:job}"));
  ASSERT_FALSE(HasKey(group->server(2), "dlock:{moved:job}"));

  // Master 3 back: the heartbeat reaches it again (its refresh reads the
  // lock's key there, a GET, and finds no hold of the holder's).
  ASSERT_OK(proxies[2].SetAdmission(Admission::kAccept));
  const int64_t gets_before = GetCalls(group->server(2));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (GetCalls(group->server(2)) == gets_before && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_GT(GetCalls(group->server(2)), gets_before);

  // Master 1 cut off from the holder only.
  ASSERT_OK(proxies[0].Partition());
  const int64_t gets_partitioned = GetCalls(group->server(2));
  EXPECT_EQ(wanted->TryAcquire().status().code(),
            absl::StatusCode::kDeadlineExceeded)
      << "the holder's deadline on master 1 still lies ahead";
  const absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(
      Hold taken,
      wanted->Acquire({.wait = absl::Seconds(20), .lease = absl::Minutes(1)}));
  // Checked before anything else: both believing at once is the failure.
  const LockState holder_state = hold.state();
  const bool holder_told = told;
  EXPECT_EQ(holder_state, LockState::kLost)
      << "two owners believe the lock: the holder still believes it after "
      << absl::Now() - start << " although a waiter won";
  EXPECT_TRUE(holder_told);
  EXPECT_LT(absl::Now() - start, kTtl + absl::Seconds(2));
  EXPECT_GT(taken.fencing_token(), hold.fencing_token());
  // The refreshes reached a majority all along: master 3 answered the
  // heartbeat every TTL/3 until the holder was told (the waiter's acquire
  // there reads with SET ... GET, not GET).
  EXPECT_GE(GetCalls(group->server(2)) - gets_partitioned, 2);
  EXPECT_OK(taken.Release());
  ASSERT_OK(proxies[0].Heal());
}

}  // namespace
}  // namespace dlock
