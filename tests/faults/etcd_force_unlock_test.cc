// Copyright dlock authors. The etcd:// backend's force unlock once a
// released hold's lease carries the client's next hold (issue 25), on a
// real cluster of three members started by the test:
//   - a force unlock that read a hold, whose holder then released it and
//     put its next hold (of another lock) on the same lease, must not end
//     that next hold: the reply of the force unlock's read is held back by
//     the fault proxy until the next hold is on the lease (a lock's force
//     unlock, and a semaphore's, whose permits share the readers' path);
//   - a hold whose key is deleted while its lease lives on (a force unlock
//     that deleted the key and never revoked the lease, `etcdctl del`) is
//     told lost to its holder at its next watchdog round, once.
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dlock/dlock.h"
#include "etcd_server.h"
#include "etcd_server_suite.h"
#include "fault_proxy.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

constexpr absl::Duration kHold = absl::Seconds(30);

class EtcdForceUnlockTest : public EtcdServerSuite<EtcdForceUnlockTest> {
 public:
  static EtcdServer::Options ServerOptions() { return {.members = 3}; }

 protected:
  // The first member through `proxy` alone, with time to wait out a stall.
  std::string UriThrough(const FaultProxy& proxy) const {
    return absl::StrCat("etcd://127.0.0.1:", proxy.port(), "?namespace=", ns_,
                        "&operation_timeout=30s");
  }

  // The leases of the namespace's keys (`name`'s alone, when given), as
  // etcdctl tells them.
  std::set<int64_t> Leases(const std::string& name = "") const {
    std::vector<std::string> args = {
        "get", absl::StrCat("/dlock/", ns_, "/", name), "-w", "json"};
    if (name.empty()) args.push_back("--prefix");
    absl::StatusOr<std::vector<int64_t>> leases = LeaseFields(args);
    EXPECT_OK(leases);
    if (!leases.ok()) return {};
    return std::set<int64_t>(leases->begin(), leases->end());
  }

  // Waits until the members answered more Ranges than `before`.
  static void WaitForRangesAfter(int64_t before) {
    for (int i = 0; i < 500; ++i) {
      absl::StatusOr<int64_t> now = server_->CallsHandled("Range");
      ASSERT_OK(now);
      if (*now > before) return;
      absl::SleepFor(absl::Milliseconds(20));
    }
    FAIL() << "the force unlock never read";
  }

  // A hold taken by `take_first` (on `holder`, whose release `take_first`
  // returns) is force-unlocked by `force` (on a client through `proxy`),
  // whose first read is answered; the answer is held back while the holder
  // releases it and takes lock "next" on the same client: when "next" went
  // on the released hold's lease, the force unlock must leave it alone.
  void ExpectStaleForceUnlockSparesTheNextHold(
      LockClient& holder,
      const std::function<std::function<absl::Status()>()>& take_first,
      const std::function<absl::Status(LockClient&)>& force) {
    FaultProxy proxy;
    ASSERT_OK(proxy.Start("127.0.0.1", server_->client_port(0)));
    ASSERT_OK_AND_ASSIGN(auto forcer, Connect(UriThrough(proxy)));
    ASSERT_OK_AND_ASSIGN(auto next_lock, holder.GetLock("next"));
    // Acquired back to back, the length is in demand and its spares ready;
    // the next hold takes the freshest, not always the one given back.
    bool reused = false;
    for (int round = 0; round < 20 && !reused; ++round) {
      std::function<absl::Status()> release_first = take_first();
      const std::set<int64_t> first_leases = Leases();
      ASSERT_OK_AND_ASSIGN(const int64_t ranges,
                           server_->CallsHandled("Range"));
      proxy.SetFault(Direction::kReplies, Fault::Stall());
      absl::Status forced = absl::UnknownError("not done");
      std::thread force_thread([&] { forced = force(*forcer); });
      WaitForRangesAfter(ranges);
      ASSERT_OK(release_first());
      ASSERT_OK_AND_ASSIGN(Hold next, next_lock->Acquire({.lease = kHold}));
      const std::set<int64_t> next_lease = Leases("next");
      reused =
          next_lease.size() == 1 && first_leases.contains(*next_lease.begin());
      proxy.SetFault(Direction::kReplies, Fault::Pass());
      force_thread.join();
      EXPECT_OK(forced);
      if (reused) {
        ASSERT_OK_AND_ASSIGN(LockInfo info, holder.Admin().Inspect("next"));
        EXPECT_TRUE(info.locked) << "the force unlock ended the next hold";
        EXPECT_EQ(info.fencing_token, next.fencing_token());
        EXPECT_OK(next.Renew());
      }
      EXPECT_OK(next.Release());
    }
    EXPECT_TRUE(reused) << "no hold went on a lease given back";
  }
};

TEST_F(EtcdForceUnlockTest, AStaleLockForceUnlockSparesTheNextHoldOnItsLease) {
  ASSERT_OK_AND_ASSIGN(auto holder, Connect(Uri()));
  ASSERT_OK_AND_ASSIGN(auto first_lock, holder->GetLock("first"));
  std::optional<Hold> first;
  ExpectStaleForceUnlockSparesTheNextHold(
      *holder,
      [&]() -> std::function<absl::Status()> {
        absl::StatusOr<Hold> held = first_lock->Acquire({.lease = kHold});
        EXPECT_OK(held);
        first = *std::move(held);
        return [&] { return first->Release(); };
      },
      [](LockClient& forcer) { return forcer.Admin().ForceUnlock("first"); });
}

TEST_F(EtcdForceUnlockTest, AStaleSemaphoreForceUnlockSparesTheNextHold) {
  ASSERT_OK_AND_ASSIGN(auto holder, Connect(Uri()));
  ASSERT_OK_AND_ASSIGN(auto semaphore, holder->GetSemaphore("first", 2));
  std::optional<Permit> first;
  ExpectStaleForceUnlockSparesTheNextHold(
      *holder,
      [&]() -> std::function<absl::Status()> {
        absl::StatusOr<Permit> held = semaphore->Acquire({.lease = kHold});
        EXPECT_OK(held);
        first = *std::move(held);
        return [&] { return first->Release(); };
      },
      [](LockClient& forcer) {
        return forcer.Admin().ForceUnlockObject(ObjectKind::kSemaphore,
                                                "first");
      });
}

// Counts the losses a client is told.
class LossCounter {
 public:
  LockLostCallback Callback() {
    return [this](const LockLostEvent&) {
      absl::MutexLock lock(&mu_);
      ++losses_;
    };
  }
  // Waits up to `timeout` for `count` losses; how many there were.
  int WaitFor(int count, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    wanted_ = count;
    mu_.AwaitWithTimeout(absl::Condition(this, &LossCounter::Reached), timeout);
    return losses_;
  }

 private:
  bool Reached() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return losses_ >= wanted_;
  }
  absl::Mutex mu_;
  int losses_ ABSL_GUARDED_BY(mu_) = 0;
  int wanted_ ABSL_GUARDED_BY(mu_) = 0;
};

// The watchdog's round reads the keys of the holds it renews: a key gone
// while its lease lives on is a hold lost, told once; the watchdog does
// not bring the key back.
TEST_F(EtcdForceUnlockTest, AHoldWhoseKeyIsDeletedIsToldLostAtTheNextRound) {
  constexpr absl::Duration kWatchdogLease = absl::Seconds(3);
  ClientOptions options;
  options.watchdog_lease = kWatchdogLease;
  LossCounter losses;
  options.on_lost = losses.Callback();
  ASSERT_OK_AND_ASSIGN(auto holder, Connect(Uri(), options));
  ASSERT_OK_AND_ASSIGN(auto lock, holder->GetLock("deleted"));
  ASSERT_OK_AND_ASSIGN(Hold held, lock->Acquire());
  ASSERT_OK(server_->Etcdctl({"del", absl::StrCat("/dlock/", ns_, "/deleted")})
                .status());

  // A round comes every third of the watchdog lease: three leases only
  // catch a hang.
  EXPECT_EQ(losses.WaitFor(1, 3 * kWatchdogLease), 1) << "never told lost";
  EXPECT_EQ(held.state(), LockState::kLost);
  EXPECT_CODE(held.Renew(), kFailedPrecondition);
  // Two more rounds: told once, and the key stays gone.
  EXPECT_EQ(losses.WaitFor(2, 2 * kWatchdogLease / 3), 1);
  ASSERT_OK_AND_ASSIGN(LockInfo info, holder->Admin().Inspect("deleted"));
  EXPECT_FALSE(info.locked);
}

}  // namespace
}  // namespace dlock::test
