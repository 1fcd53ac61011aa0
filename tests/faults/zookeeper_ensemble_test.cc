// Copyright dlock authors. zk:// on a 3-server ensemble on loopback: the
// leader is killed while a lock is held and others wait. Afterwards there is
// exactly one holder at a time, or the old holder was told the lock was lost
// before anyone else acquired it.
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "failover_contention.h"
#include "gtest/gtest.h"
#include "status_testing.h"
#include "zookeeper_server.h"

namespace dlock::test {
namespace {

constexpr char kLockName[] = "through a leader change";

// When each owner began and stopped believing it held the lock.
struct Tenure {
  std::string who;
  uint64_t token = 0;
  absl::Time from;
  absl::Time until = absl::InfiniteFuture();
};

class Timeline {
 public:
  void Begin(const std::string& who, uint64_t token) {
    absl::MutexLock lock(&mu_);
    tenures_.push_back(Tenure{who, token, absl::Now()});
  }
  void End(const std::string& who) {
    absl::MutexLock lock(&mu_);
    for (Tenure& t : tenures_) {
      if (t.who == who && t.until == absl::InfiniteFuture()) {
        t.until = absl::Now();
      }
    }
  }
  std::vector<Tenure> Tenures() {
    absl::MutexLock lock(&mu_);
    return tenures_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Tenure> tenures_;
};

// zk://<member `first`, then the others>: with the C client's deterministic
// order, the client connects to `first`.
std::string UriFirst(const ZooKeeperServer& ensemble, int first,
                     const std::string& extra) {
  std::vector<std::string> hosts;
  hosts.push_back(absl::StrCat("127.0.0.1:", ensemble.client_port(first)));
  for (int i = 0; i < ensemble.size(); ++i) {
    if (i != first) {
      hosts.push_back(absl::StrCat("127.0.0.1:", ensemble.client_port(i)));
    }
  }
  return absl::StrCat("zk://", absl::StrJoin(hosts, ","),
                      "?namespace=ensemble&", extra);
}

// The leader the remaining members elect once one was killed, within 30s.
absl::StatusOr<int> WaitForNewLeader(ZooKeeperServer& ensemble) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  absl::StatusOr<int> leader = ensemble.Leader();
  while (!leader.ok() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(100));
    leader = ensemble.Leader();
  }
  return leader;
}

TEST(ZooKeeperEnsemble, LeaderLossNeverGivesTwoHolders) {
  absl::StatusOr<std::unique_ptr<ZooKeeperServer>> ensemble =
      ZooKeeperServer::Start({.servers = 3});
  ASSERT_OK(ensemble);
  absl::StatusOr<int> leader = (*ensemble)->Leader();
  ASSERT_OK(leader);
  const int follower = (*leader + 1) % 3;
  // The holder talks to the leader, the waiters to a follower.
  zoo_deterministic_conn_order(1);

  Timeline timeline;
  ClientOptions holder_options;
  holder_options.watchdog_lease = absl::Seconds(3);
  holder_options.on_lost = [&timeline](const LockLostEvent&) {
    timeline.End("holder");
  };
  absl::StatusOr<std::unique_ptr<LockClient>> holder = Connect(
      UriFirst(**ensemble, *leader, "session_timeout=15s"), holder_options);
  ASSERT_OK(holder);
  absl::StatusOr<std::unique_ptr<DistributedLock>> held =
      (*holder)->GetLock(kLockName);
  ASSERT_OK(held);
  absl::StatusOr<Hold> first = (*held)->Acquire();
  ASSERT_OK(first);
  timeline.Begin("holder", first->fencing_token());

  // Two waiters block on the lock through the failover.
  std::vector<std::thread> waiters;
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([&, i] {
      const std::string who = absl::StrCat("waiter", i);
      absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(UriFirst(
          **ensemble, follower, "session_timeout=15s&connect_timeout=20s"));
      ASSERT_OK(client);
      absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
          (*client)->GetLock(kLockName);
      ASSERT_OK(lock);
      // One wait covers the election: it rides out the connection loss
      // (docs/semantics.md, "Riding out a failover").
      AcquireOptions wait;
      wait.wait = absl::Seconds(60);
      absl::StatusOr<Hold> got = (*lock)->Acquire(wait);
      ASSERT_OK(got);
      timeline.Begin(who, got->fencing_token());
      absl::SleepFor(absl::Milliseconds(300));
      timeline.End(who);
      EXPECT_OK(got->Release());
    });
  }
  absl::SleepFor(absl::Milliseconds(500));  // both waiting

  (*ensemble)->KillMember(*leader);
  const absl::Time killed = absl::Now();
  // The other two elect a leader among themselves.
  absl::StatusOr<int> new_leader = WaitForNewLeader(**ensemble);
  ASSERT_OK(new_leader) << "no new leader after 30s";
  EXPECT_NE(*new_leader, *leader);
  // Let the holder reconnect (or learn its loss), then let go.
  absl::SleepFor(absl::Seconds(2));
  const LockState state = first->state();
  if (state == LockState::kHeld) {
    timeline.End("holder");
    EXPECT_OK(first->Release());
  } else {
    EXPECT_EQ(state, LockState::kLost);
  }
  for (std::thread& t : waiters) t.join();

  // Nobody's tenure overlaps another's, and tokens rise with each holder.
  std::vector<Tenure> tenures = timeline.Tenures();
  ASSERT_EQ(tenures.size(), 3u);
  std::sort(tenures.begin(), tenures.end(),
            [](const Tenure& a, const Tenure& b) { return a.from < b.from; });
  for (size_t i = 1; i < tenures.size(); ++i) {
    EXPECT_LE(tenures[i - 1].until, tenures[i].from)
        << tenures[i - 1].who << " still believed it held the lock when "
        << tenures[i].who << " got it";
    EXPECT_GT(tenures[i].token, tenures[i - 1].token);
  }
  EXPECT_EQ(tenures[0].who, "holder");
  std::printf(
      "holder %s the leader's loss; first waiter got the lock %s "
      "after the kill\n",
      state == LockState::kHeld ? "kept its lock through"
                                : "was told it lost its lock in",
      absl::FormatDuration(tenures[1].from - killed).c_str());
}

// Waiters contend through the leader's death (issue 19 §6): each worker's
// client starts on another member, so that some lose their server with the
// leader. No acquire with a wait returns an error, nobody holds the lock
// twice, and the tokens keep rising. DLOCK_HISTORY_PROFILE=long kills the
// new leader too, after the killed one is back.
TEST(ZooKeeperEnsemble, WaitersRideOutTheLeadersDeath) {
  absl::StatusOr<std::unique_ptr<ZooKeeperServer>> ensemble =
      ZooKeeperServer::Start({.servers = 3});
  ASSERT_OK(ensemble);
  zoo_deterministic_conn_order(1);
  ContentionOptions options;
  Contention contention(
      [&](int i) { return UriFirst(**ensemble, i % 3, "session_timeout=15s"); },
      options);
  ASSERT_TRUE(contention.WaitForGrants(10, absl::Seconds(30)))
      << "the workers never got going";
  const char* profile = std::getenv("DLOCK_HISTORY_PROFILE");
  const int rounds =
      profile != nullptr && std::string(profile) == "long" ? 2 : 1;
  std::string figures;
  for (int round = 0; round < rounds; ++round) {
    absl::StatusOr<int> leader = (*ensemble)->Leader();
    ASSERT_OK(leader);
    if (round == 0) contention.MarkFault();
    const absl::Time killed = absl::Now();
    (*ensemble)->KillMember(*leader);
    ASSERT_OK(WaitForNewLeader(**ensemble)) << "no new leader after 30s";
    const absl::Time elected = absl::Now();
    const int before = contention.grants();
    ASSERT_TRUE(contention.WaitForGrants(before + 2 * options.workers,
                                         absl::Seconds(60)))
        << "the workers stopped getting the lock after the election";
    absl::StrAppend(&figures, " [new leader ",
                    absl::FormatDuration(
                        absl::Trunc(elected - killed, absl::Milliseconds(1))),
                    " after the kill]");
    ASSERT_OK((*ensemble)->StartMember(*leader));
  }
  const ContentionReport report = contention.Stop();
  std::printf("FAILOVER zookeeper ensemble, %d waiters with wait 60s:%s %s\n",
              options.workers, figures.c_str(), report.Summary().c_str());
  ExpectRodeOut(report, 2 * options.workers);
}

}  // namespace
}  // namespace dlock::test
