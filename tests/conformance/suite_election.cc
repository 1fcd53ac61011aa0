// Copyright dlock authors. Conformance: leader election (C24). Each case is
// named after the clause; a backend whose traits do not offer elections is
// checked for answering Unimplemented with its reason.
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

constexpr char kName[] = "scheduler";

AcquireOptions Waiting(absl::Duration wait = kNoHang) {
  return WithLease(kLongLease, wait);
}

TEST_P(Conformance, C24_OneLeaderAtATime) {
  std::vector<std::unique_ptr<LockClient>> clients;
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(auto c, NewClient());
    clients.push_back(std::move(c));
  }
  if (!Offered(*clients[0], Primitive::kElection)) return;
  std::atomic<int> leaders{0}, overlaps{0}, terms{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      absl::StatusOr<std::unique_ptr<Election>> election =
          clients[t]->GetElection(kName);
      ASSERT_OK(election);
      for (int round = 0; round < 5; ++round) {
        absl::StatusOr<Leadership> me =
            (*election)->Campaign(absl::StrCat("node-", t), Waiting());
        ASSERT_OK(me);
        ASSERT_EQ(me->state(), LockState::kHeld);
        if (leaders.fetch_add(1) != 0) ++overlaps;
        ++terms;
        absl::SleepFor(absl::Milliseconds(3));
        leaders.fetch_sub(1);
        EXPECT_OK(me->Resign());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0) << "two believed leaders at once";
  EXPECT_EQ(terms.load(), 20);
}

TEST_P(Conformance, C24_TermsStrictlyIncrease) {
  ASSERT_OK_AND_ASSIGN(auto a, NewClient());
  ASSERT_OK_AND_ASSIGN(auto b, NewClient());
  if (!Offered(*a, Primitive::kElection)) return;
  ASSERT_OK_AND_ASSIGN(auto ea, a->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(auto eb, b->GetElection(kName));
  uint64_t last = 0;
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK_AND_ASSIGN(Leadership me,
                         (i % 2 ? ea : eb)->Campaign("v", Waiting()));
    EXPECT_GT(me.term(), last);
    last = me.term();
    EXPECT_OK(me.Resign());
  }
}

TEST_P(Conformance, C24_LeaderAndValueAreReadable) {
  ASSERT_OK_AND_ASSIGN(auto leader, NewClient());
  ASSERT_OK_AND_ASSIGN(auto observer, NewClient());
  if (!Offered(*leader, Primitive::kElection)) return;
  ASSERT_OK_AND_ASSIGN(auto mine, leader->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(auto seen, observer->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(LeaderInfo none, seen->Leader());
  EXPECT_FALSE(none.has_leader);
  ASSERT_OK_AND_ASSIGN(Leadership me, mine->Campaign("10.0.0.7:8080"));
  ASSERT_OK_AND_ASSIGN(LeaderInfo info, seen->Leader());
  EXPECT_TRUE(info.has_leader);
  EXPECT_EQ(info.name, kName);
  EXPECT_EQ(info.owner, me.hold().owner());
  EXPECT_EQ(info.value, "10.0.0.7:8080");
  EXPECT_EQ(info.term, me.term());
  EXPECT_GT(info.remaining_lease, absl::ZeroDuration());
  EXPECT_OK(me.Resign());
  ASSERT_OK_AND_ASSIGN(info, seen->Leader());
  EXPECT_FALSE(info.has_leader);
}

TEST_P(Conformance, C24_ProclaimChangesTheValue) {
  ASSERT_OK_AND_ASSIGN(auto leader, NewClient());
  ASSERT_OK_AND_ASSIGN(auto observer, NewClient());
  if (!Offered(*leader, Primitive::kElection)) return;
  ASSERT_OK_AND_ASSIGN(auto mine, leader->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(auto seen, observer->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(Leadership me, mine->Campaign("a:1"));
  ASSERT_OK(me.Proclaim("a:2"));
  EXPECT_EQ(me.value(), "a:2");
  ASSERT_OK_AND_ASSIGN(LeaderInfo info, seen->Leader());
  EXPECT_EQ(info.value, "a:2");
  EXPECT_EQ(info.term, me.term()) << "a proclaim keeps the term";
  // Campaigning again while leading re-enters, proclaiming its value.
  ASSERT_OK_AND_ASSIGN(Leadership again, mine->Campaign("a:3"));
  EXPECT_EQ(again.term(), me.term());
  ASSERT_OK_AND_ASSIGN(info, seen->Leader());
  EXPECT_EQ(info.value, "a:3");
  EXPECT_OK(again.Resign());
  EXPECT_OK(me.Resign());
}

TEST_P(Conformance, C24_DeposedLeaderCannotProclaim) {
  ASSERT_OK_AND_ASSIGN(auto leader, NewClient());
  ASSERT_OK_AND_ASSIGN(auto admin, NewClient());
  if (!Offered(*leader, Primitive::kElection)) return;
  ASSERT_OK_AND_ASSIGN(auto mine, leader->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(auto seen, admin->GetElection(kName));
  LostRecorder lost;
  AcquireOptions watched = Waiting();
  watched.on_lost = lost.Callback();
  ASSERT_OK_AND_ASSIGN(Leadership me, mine->Campaign("old", watched));
  ASSERT_OK(admin->Admin().ForceUnlockObject(ObjectKind::kElection, kName,
                                             me.term()));
  ASSERT_OK_AND_ASSIGN(Leadership next, seen->Campaign("new", Waiting()));
  const absl::Status proclaimed = me.Proclaim("stale");
  EXPECT_TRUE(IsLost(proclaimed)) << proclaimed;
  ASSERT_OK_AND_ASSIGN(LeaderInfo info, seen->Leader());
  EXPECT_EQ(info.value, "new") << "a deposed leader's value got through";
  EXPECT_EQ(me.state(), LockState::kLost);
  EXPECT_EQ(SettledEvents(lost), 1u) << "told once";
  EXPECT_OK(next.Resign());
}

TEST_P(Conformance, C24_WaitForChangeWakesFarSoonerThanFallbackPoll) {
  ASSERT_OK_AND_ASSIGN(auto a, NewClient());
  ASSERT_OK_AND_ASSIGN(auto b, NewClient());
  ASSERT_OK_AND_ASSIGN(auto observer, NewClient(SlowPollOptions()));
  if (!Offered(*a, Primitive::kElection)) return;
  ASSERT_OK_AND_ASSIGN(auto ea, a->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(auto eb, b->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(auto watched, observer->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(Leadership first, ea->Campaign("a"));
  ASSERT_OK_AND_ASSIGN(LeaderInfo seen, watched->Leader());
  std::thread hand_over([&] {
    absl::SleepFor(kLetWaiterBlock);
    EXPECT_OK(first.Resign());
  });
  absl::StatusOr<Leadership> second;
  std::thread campaigner([&] { second = eb->Campaign("b", Waiting()); });
  const absl::Time start = absl::Now();
  // Follow the election until the new leader shows (the resignation may
  // show first, as a reading without a leader).
  absl::Status followed;
  for (int i = 0; i < 4 && (!seen.has_leader || seen.value != "b"); ++i) {
    absl::StatusOr<LeaderInfo> next = watched->WaitForChange(seen, kNoHang);
    followed = next.status();
    if (!next.ok()) break;
    seen = *std::move(next);
  }
  const absl::Duration took = absl::Now() - start;
  hand_over.join();
  campaigner.join();
  ASSERT_OK(followed);
  EXPECT_EQ(seen.value, "b");
  EXPECT_LT(took, absl::Seconds(2)) << "woken by a poll, not an announcement";
  ASSERT_OK(second);
  EXPECT_EQ(seen.term, second->term());
  EXPECT_OK(second->Resign());
  // Nothing changes: the wait ends with the time given.
  absl::StatusOr<LeaderInfo> unchanged =
      watched->WaitForChange(LeaderInfo{}, absl::Milliseconds(50));
  EXPECT_TRUE(IsWaitExpired(unchanged.status())) << unchanged.status();
}

TEST_P(Conformance, C24_ResignElectsTheNext) {
  ASSERT_OK_AND_ASSIGN(auto a, NewClient());
  ASSERT_OK_AND_ASSIGN(auto b, NewClient(SlowPollOptions()));
  if (!Offered(*a, Primitive::kElection)) return;
  ASSERT_OK_AND_ASSIGN(auto ea, a->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(auto eb, b->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(Leadership first, ea->Campaign("a"));
  absl::StatusOr<Leadership> second;
  absl::Time elected;
  std::thread campaigner([&] {
    second = eb->Campaign("b", Waiting());
    elected = absl::Now();
  });
  absl::SleepFor(kLetWaiterBlock);
  const absl::Time resigned = absl::Now();
  EXPECT_OK(first.Resign());
  campaigner.join();
  ASSERT_OK(second);
  EXPECT_LE(elected - resigned, kPromptly) << "waited for a poll";
  EXPECT_GT(second->term(), first.term());
  EXPECT_OK(second->Resign());
}

TEST_P(Conformance, C24_DeposedLeaderIsToldBeforeTheNextIsElected) {
  CutOffHolder holder;
  ASSERT_OK_AND_ASSIGN(auto cut_off, NewClient(holder.Options()));
  ASSERT_OK_AND_ASSIGN(auto next, NewClient(SlowPollOptions()));
  if (!Offered(*next, Primitive::kElection)) return;
  ASSERT_OK_AND_ASSIGN(auto deposed, cut_off->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(auto successor, next->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(
      Leadership me,
      deposed->Campaign("old", holder.Watched(ObjectKind::kElection)));
  holder.Cut();
  const absl::Time cut = absl::Now();
  ASSERT_OK_AND_ASSIGN(Leadership them, successor->Campaign("new", Waiting()));
  const absl::Time elected = absl::Now();
  EXPECT_LE(holder.told(), elected) << "the deposed leader was told after";
  // The campaigner wakes at the leader's lease end, not at its fallback poll.
  EXPECT_LE(elected - cut, kShortWatchdogLease + kPromptly)
      << "the campaigner polled (every " << kSlowFallbackPoll
      << ") instead of waking at the leader's lease end";
  EXPECT_GT(them.term(), me.term());
  EXPECT_EQ(me.state(), LockState::kLost);
  EXPECT_OK(them.Resign());
}

TEST_P(Conformance, C24_CampaignerGivingUpLeavesNothing) {
  ASSERT_OK_AND_ASSIGN(auto a, NewClient());
  ASSERT_OK_AND_ASSIGN(auto b, NewClient());
  ASSERT_OK_AND_ASSIGN(auto c, NewClient());
  if (!Offered(*a, Primitive::kElection)) return;
  ASSERT_OK_AND_ASSIGN(auto ea, a->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(auto eb, b->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(auto ec, c->GetElection(kName));
  ASSERT_OK_AND_ASSIGN(Leadership first, ea->Campaign("a"));
  absl::StatusOr<Leadership> timed_out =
      eb->Campaign("b", Waiting(absl::Milliseconds(300)));
  EXPECT_TRUE(IsWaitExpired(timed_out.status())) << timed_out.status();
  CancelToken cancel;
  std::thread canceller = CancelAfter(cancel, kLetWaiterBlock);
  AcquireOptions cancelled = Waiting();
  cancelled.cancel = cancel;
  EXPECT_CODE(eb->Campaign("b", cancelled), kCancelled);
  canceller.join();
  ASSERT_OK_AND_ASSIGN(std::vector<ObjectInfo> listed,
                       c->Admin().ListObjects(ObjectKind::kElection));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].holders.size(), 1u);
  EXPECT_FALSE(listed[0].waiter.has_value()) << "a campaigner left a place";
  EXPECT_OK(first.Resign());
  ASSERT_OK_AND_ASSIGN(listed, c->Admin().ListObjects(ObjectKind::kElection));
  EXPECT_TRUE(listed.empty()) << "something left after the last resignation";
  ASSERT_OK_AND_ASSIGN(Leadership next,
                       ec->Campaign("c", WithLease(kLongLease)));
  EXPECT_OK(next.Resign());
}

}  // namespace
}  // namespace dlock::test
