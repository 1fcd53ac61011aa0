// Copyright dlock authors. Conformance: multi-locks, all or nothing (C25).
// Every backend offers them: atomically where it can, else taken by the
// core one by one in one global order.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fault_backend.h"
#include "primitives_fixture.h"

namespace dlock::test {
namespace {

using Names = std::vector<std::string>;

AcquireOptions Waiting(absl::Duration wait = kNoHang) {
  return WithLease(kLongLease, wait);
}

// Whether every name is free: another client's one try gets each.
::testing::AssertionResult AllFree(LockClient& client, const Names& names) {
  for (const std::string& name : names) {
    absl::StatusOr<Hold> hold = client.TryAcquire(name, WithLease(kLongLease));
    if (!hold.ok()) {
      return ::testing::AssertionFailure()
             << "'" << name << "' is not free: " << hold.status();
    }
    if (absl::Status s = hold->Release(); !s.ok()) {
      return ::testing::AssertionFailure() << s;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_P(Conformance, C25_OneHeldNameMeansNoneTaken) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(Hold b, other->TryAcquire("b", WithLease(kLongLease)));
  absl::StatusOr<MultiHold> all =
      client->AcquireAll(Names{"a", "b", "c"}, WithLease(kLongLease));
  EXPECT_TRUE(IsHeldByAnother(all.status())) << all.status();
  EXPECT_TRUE(AllFree(*other, {"a", "c"}));
  EXPECT_OK(b.Release());
}

TEST_P(Conformance, C25_TimedOutOrCancelledLeavesNoneHeld) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  ASSERT_OK_AND_ASSIGN(Hold c, other->TryAcquire("c", WithLease(kLongLease)));
  absl::StatusOr<MultiHold> timed_out = client->AcquireAll(
      Names{"a", "b", "c"}, Waiting(absl::Milliseconds(300)));
  EXPECT_TRUE(IsWaitExpired(timed_out.status())) << timed_out.status();
  EXPECT_TRUE(AllFree(*other, {"a", "b"}));

  CancelToken cancel;
  std::thread canceller = CancelAfter(cancel, kLetWaiterBlock);
  AcquireOptions cancelled = Waiting();
  cancelled.cancel = cancel;
  EXPECT_CODE(client->AcquireAll(Names{"c", "b", "a"}, cancelled), kCancelled);
  canceller.join();
  EXPECT_TRUE(AllFree(*other, {"a", "b"}));
  EXPECT_OK(c.Release());
}

TEST_P(Conformance, C25_OppositeOrdersNeverDeadlock) {
  const Names pool = {"n0", "n1", "n2", "n3"};
  std::vector<std::unique_ptr<LockClient>> clients;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto c, NewClient());
    clients.push_back(std::move(c));
  }
  std::atomic<int> done{0};
  std::atomic<int> overlaps{0};
  std::vector<std::atomic<int>> inside(pool.size());
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      // Three of the four, in an order of this thread's own.
      Names names;
      for (int k = 0; k < 3; ++k)
        names.push_back(pool[(t + (t % 2 ? 3 - k : k)) % 4]);
      for (int round = 0; round < 15; ++round) {
        absl::StatusOr<MultiHold> all =
            clients[t % clients.size()]->AcquireAll(names, Waiting());
        ASSERT_OK(all);
        std::vector<int> mine;
        for (const std::string& n : names) mine.push_back(n[1] - '0');
        for (int i : mine) {
          if (inside[i].fetch_add(1) != 0) ++overlaps;
        }
        absl::SleepFor(absl::Milliseconds(1));
        for (int i : mine) inside[i].fetch_sub(1);
        EXPECT_OK(all->Release());
      }
      ++done;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(done.load(), 6);
  EXPECT_EQ(overlaps.load(), 0);
}

TEST_P(Conformance, C25_ReleaseFreesEveryName) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  const Names names = {"x", "y", "z"};
  ASSERT_OK_AND_ASSIGN(MultiHold all, client->AcquireAll(names, Waiting()));
  EXPECT_EQ(all.state(), LockState::kHeld);
  EXPECT_EQ(all.names(), names);
  for (const std::string& name : names) {
    EXPECT_GT(all.fencing_token(name), 0u);
    EXPECT_CODE(other->TryAcquire(name, WithLease(kLongLease)),
                kDeadlineExceeded);
  }
  EXPECT_OK(all.Release());
  EXPECT_FALSE(all.active());
  EXPECT_TRUE(AllFree(*other, names));
}

TEST_P(Conformance, C25_LosingOneNameIsLosingAllToldOnce) {
  ClientOptions options;
  options.watchdog_lease = kShortWatchdogLease;
  ASSERT_OK_AND_ASSIGN(auto client, NewClient(options));
  ASSERT_OK_AND_ASSIGN(auto admin, NewClient());
  LostRecorder lost;
  AcquireOptions watched;
  watched.wait = kNoHang;
  watched.on_lost = lost.Callback();
  ASSERT_OK_AND_ASSIGN(MultiHold all,
                       client->AcquireAll(Names{"p", "q", "r"}, watched));
  ASSERT_OK(admin->Admin().ForceUnlock("q"));
  ASSERT_TRUE(lost.WaitForEvents(1, kNoHang)) << "the loss was not told";
  EXPECT_TRUE(all.lost_token().IsCancelled());
  EXPECT_EQ(all.state(), LockState::kLost);
  EXPECT_TRUE(IsLost(all.lost_reason())) << all.lost_reason();
  EXPECT_EQ(lost.Events()[0].name, "q");
  EXPECT_CODE(all.Release(), kFailedPrecondition);
  EXPECT_EQ(SettledEvents(lost), 1u) << "told once for the multi-hold";
  EXPECT_TRUE(AllFree(*admin, {"p", "q", "r"}));
}

TEST_P(Conformance, C25_ReleaseThatFailsIsRetriedForEveryName) {
  auto faults = std::make_shared<FaultPlan>();
  ClientOptions options;
  options.backend_decorator = faults->Decorator();
  ASSERT_OK_AND_ASSIGN(auto client, NewClient(options));
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  const Names names = {"f1", "f2", "f3"};
  ASSERT_OK_AND_ASSIGN(MultiHold all, client->AcquireAll(names, Waiting()));
  faults->Set(FaultPlan::kRelease, {.fail_before = true, .times = 3});
  EXPECT_CODE(all.Release(), kUnavailable);
  // Retried in the background until the backend confirms (C21).
  EXPECT_TRUE(Eventually([&] { return AllFree(*other, names); }, kNoHang));
}

TEST_P(Conformance, C25_BadNameListsAreInvalidArgument) {
  auto faults = std::make_shared<FaultPlan>();
  ClientOptions options;
  options.backend_decorator = faults->Decorator();
  ASSERT_OK_AND_ASSIGN(auto client, NewClient(options));
  EXPECT_CODE(client->AcquireAll(Names{}), kInvalidArgument);
  EXPECT_CODE(client->AcquireAll(Names{"a", "b", "a"}), kInvalidArgument);
  EXPECT_CODE(client->AcquireAll(Names{"a", ""}), kInvalidArgument);
  EXPECT_CODE(client->AcquireAll(Names{"a", std::string("b\x01", 2)}),
              kInvalidArgument);
  Names many;
  for (size_t i = 0; i <= kMaxMultiLockNames; ++i) {
    many.push_back(absl::StrCat("n", i));
  }
  EXPECT_CODE(client->AcquireAll(many), kInvalidArgument);
  EXPECT_EQ(faults->calls(FaultPlan::kAcquire), 0) << "nothing sent";
}

}  // namespace
}  // namespace dlock::test
