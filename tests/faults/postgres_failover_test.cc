// Copyright dlock authors. PostgreSQL failover (issue 19, docs/postgres.md
// "Failover"): a primary and a streaming standby that the harness starts
// (integration/postgres_replication.h), clients on libpq's host list with
// target_session_attrs=read-write, the primary killed with SIGKILL and the
// standby promoted. With synchronous replication a confirmed grant survives
// and nobody else is granted the lock; an unconfirmed one is never believed.
// With asynchronous replication a grant made just before the failover is
// lost and given again: the loss is reproduced, and the fencing tokens still
// order the two holders, so that a fenced resource refuses the stale one.
// Each case prints a "FAILOVER ..." line with its figures.
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "failover_contention.h"
#include "gtest/gtest.h"
#include "postgres_replication.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

// How long a client may take to reach the new primary once it is promoted:
// its pooled connection to the dead primary is dropped and a new one made
// (connection refused at once, then the standby), on a loaded machine.
constexpr absl::Duration kReach = absl::Seconds(10);
constexpr absl::Duration kWatchdogLease = absl::Seconds(6);

// A resource that guards itself with fencing tokens, as the history
// checker's register does: it refuses a write whose token is below the
// largest it accepted before.
class Fence {
 public:
  bool Write(uint64_t token) {
    if (token < largest_) {
      ++refused_;
      return false;
    }
    largest_ = token;
    return true;
  }
  int refused() const { return refused_; }

 private:
  uint64_t largest_ = 0;
  int refused_ = 0;
};

// When, and why, a client was told that a hold was lost.
struct LossWatch {
  absl::Notification told;
  absl::Mutex mu;
  absl::Time at;
  absl::Status reason;

  void Tell(const LockLostEvent& e) {
    absl::MutexLock lock(&mu);
    if (told.HasBeenNotified()) return;
    at = absl::Now();
    reason = e.reason;
    told.Notify();
  }
  absl::Time When() {
    absl::MutexLock lock(&mu);
    return at;
  }
};

// Two clients after the lock "job": `holder` takes it (`hold`, whose token
// it writes to `fence`), and its losses are told to `watch`; `other` wants
// it.
struct Contenders {
  LossWatch watch;
  Fence fence;
  std::unique_ptr<LockClient> holder;
  std::unique_ptr<LockClient> other;
  std::unique_ptr<DistributedLock> held;
  std::unique_ptr<DistributedLock> wanted;
  Hold hold;
};

std::string Ms(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

// One pair for the binary (an initdb and a base backup take seconds on a
// loaded machine); each case starts from a healthy pair, rebuilt after the
// previous case's failover, and uses a namespace of its own.
class PostgresFailoverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<PostgresReplication>> pair =
        PostgresReplication::Start({.synchronous = true});
    ASSERT_OK(pair);
    pair_ = pair->release();
  }
  static void TearDownTestSuite() {
    delete pair_;
    pair_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(pair_, nullptr) << "no replicated pair"; }

  // A standby streaming from the primary, synchronously or not, and
  // replication passing.
  void Prepare(bool synchronous) {
    ASSERT_OK(pair_->link().Heal());
    if (failed_over_) {
      ASSERT_OK(pair_->Rebuild());
      failed_over_ = false;
    }
    ASSERT_OK(pair_->SetSynchronous(synchronous));
    ns_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : ns_) {
      if (!absl::ascii_isalnum(c)) c = '-';
    }
  }

  // A client of the pair in mode `mode` whose losses `watch` hears.
  std::unique_ptr<LockClient> Client(const std::string& mode,
                                     LossWatch* watch = nullptr) {
    ClientOptions options;
    options.watchdog_lease = kWatchdogLease;
    if (watch != nullptr) {
      options.on_lost = [watch](const LockLostEvent& e) { watch->Tell(e); };
    }
    const std::string extra =
        mode == "session" ? "mode=session&session_grace=1s" : "mode=lease";
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        Connect(pair_->Uri(ns_, extra), options);
    EXPECT_OK(client);
    return client.ok() ? *std::move(client) : nullptr;
  }

  // The clients, connected; then, unless `take` is false, the hold.
  void Contend(const std::string& mode, Contenders& c, bool take = true) {
    c.holder = Client(mode, &c.watch);
    c.other = Client(mode);
    ASSERT_TRUE(c.holder != nullptr && c.other != nullptr);
    ASSERT_OK_AND_ASSIGN(c.held, c.holder->GetLock("job"));
    ASSERT_OK_AND_ASSIGN(c.wanted, c.other->GetLock("job"));
    if (take) {
      ASSERT_NO_FATAL_FAILURE(Take(c));
    }
  }
  void Take(Contenders& c) {
    ASSERT_OK_AND_ASSIGN(c.hold, c.held->Acquire());
    EXPECT_TRUE(c.fence.Write(c.hold.fencing_token()));
  }

  // The primary killed, the standby promoted; returns when that was done.
  absl::Time FailOver() {
    failed_over_ = true;
    pair_->KillPrimary();
    const absl::Status promoted = pair_->Promote();
    EXPECT_OK(promoted);
    return absl::Now();
  }

  // One attempt after another until the new primary answers one (the
  // client's connections to the old one fail with Unavailable meanwhile).
  absl::StatusOr<Hold> TryUntilServed(DistributedLock& lock) {
    const absl::Time give_up = absl::Now() + kReach;
    while (true) {
      absl::StatusOr<Hold> tried = lock.TryAcquire();
      if (tried.ok() || !absl::IsUnavailable(tried.status()) ||
          absl::Now() > give_up) {
        return tried;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

  void LoseAGrant(const std::string& mode);

  static inline PostgresReplication* pair_ = nullptr;
  static inline bool failed_over_ = false;
  std::string ns_;
};

TEST_F(PostgresFailoverTest, SynchronousLeaseHoldSurvivesAndNobodyElseGetsIt) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*synchronous=*/true));
  Contenders c;
  ASSERT_NO_FATAL_FAILURE(Contend("lease", c));

  const absl::Time killed_at = absl::Now();
  const absl::Time promoted_at = FailOver();
  // The grant was confirmed, so the standby had it: no second owner.
  absl::StatusOr<Hold> second = TryUntilServed(*c.wanted);
  const absl::Time served_at = absl::Now();
  EXPECT_TRUE(IsHeldByAnother(second.status())) << second.status();
  // The holder keeps its hold: its renewal reaches the new primary, which
  // has its row.
  const absl::Status renewed = c.hold.Renew();
  const absl::Time renewed_at = absl::Now();
  EXPECT_OK(renewed);
  EXPECT_EQ(c.hold.state(), LockState::kHeld);
  EXPECT_FALSE(c.watch.told.HasBeenNotified()) << c.watch.reason;
  ASSERT_OK_AND_ASSIGN(LockInfo info, c.other->Admin().Inspect("job"));
  EXPECT_EQ(info.fencing_token, c.hold.fencing_token());

  const uint64_t first_token = c.hold.fencing_token();
  EXPECT_OK(c.hold.Release());
  ASSERT_OK_AND_ASSIGN(Hold next, c.wanted->TryAcquire());
  EXPECT_GT(next.fencing_token(), first_token);
  EXPECT_TRUE(c.fence.Write(next.fencing_token()));
  EXPECT_FALSE(c.fence.Write(first_token));
  std::cout << "FAILOVER synchronous lease: grants lost 0, second owners 0, "
               "promotion took "
            << Ms(promoted_at - killed_at) << ", new primary served "
            << Ms(served_at - killed_at) << " after the kill, holder renewed "
            << Ms(renewed_at - killed_at) << " after it (hold kept)"
            << std::endl;
}

TEST_F(PostgresFailoverTest, SynchronousSessionHoldIsToldLostBeforeTakeover) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*synchronous=*/true));
  Contenders c;
  ASSERT_NO_FATAL_FAILURE(Contend("session", c));

  const absl::Time killed_at = absl::Now();
  FailOver();
  // The hold's session died with the old primary: the holder is told.
  ASSERT_TRUE(c.watch.told.WaitForNotificationWithTimeout(kReach))
      << "the holder was not told that its session ended";
  const absl::Time told_at = c.watch.When();
  EXPECT_EQ(c.hold.state(), LockState::kLost);
  // The row survived (synchronous), so the taker waits out the dead
  // session's grace (1s) on the new primary.
  AcquireOptions wait;
  wait.wait = kReach;
  absl::StatusOr<Hold> taken = c.wanted->Acquire(wait);
  const absl::Time taken_at = absl::Now();
  ASSERT_OK(taken);
  EXPECT_LE(told_at, taken_at);
  EXPECT_GT(taken->fencing_token(), c.hold.fencing_token());
  EXPECT_TRUE(c.fence.Write(taken->fencing_token()));
  EXPECT_FALSE(c.fence.Write(c.hold.fencing_token()));
  std::cout << "FAILOVER synchronous session: holder told lost "
            << Ms(told_at - killed_at) << " after the kill ("
            << c.watch.reason.message() << "), taken over "
            << Ms(taken_at - killed_at) << " after it" << std::endl;
}

// With the standby cut off, a synchronous commit never returns: the grant
// is never confirmed, the client never believes it, and the standby, which
// never had it, gives the lock to the next comer.
TEST_F(PostgresFailoverTest, SynchronousUnconfirmedGrantIsNeverBelieved) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*synchronous=*/true));
  Contenders c;
  ASSERT_NO_FATAL_FAILURE(Contend("lease", c, /*take=*/false));
  ASSERT_OK(pair_->link().Partition());

  absl::StatusOr<Hold> attempt = absl::UnknownError("not run");
  std::thread acquirer([&] { attempt = c.held->TryAcquire(); });
  // The grant committed on the primary and waits for the standby.
  const absl::Status waiting = WaitUntil(
      [&] {
        absl::StatusOr<std::string> n = pair_->primary().Psql(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = "
            "'SyncRep';");
        return n.ok() && *n == "1";
      },
      kReach, "the grant waiting for the synchronous standby");
  EXPECT_OK(waiting);
  FailOver();
  acquirer.join();
  EXPECT_CODE(attempt, kUnavailable);
  ASSERT_OK_AND_ASSIGN(Hold taken, TryUntilServed(*c.wanted));
  EXPECT_EQ(taken.state(), LockState::kHeld);
  std::cout << "FAILOVER synchronous unconfirmed grant: the acquirer got "
            << attempt.status().message() << "; the lock went to the next comer"
            << std::endl;
}

// A host list without target_session_attrs still finds the primary (dlock
// asks for read-write when several hosts are given); a URI naming only the
// standby gets Unavailable (SQLSTATE 25006), to try again once promoted.
TEST_F(PostgresFailoverTest, HostListFindsThePrimaryAndAStandbyIsUnavailable) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*synchronous=*/true));
  const std::string standby_first = absl::StrCat(
      "postgres://postgres@127.0.0.1:", pair_->standby().port(),
      ",127.0.0.1:", pair_->primary().port(), "/postgres?namespace=", ns_);
  ASSERT_OK_AND_ASSIGN(auto client, Connect(standby_first));
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("job"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->TryAcquire());
  EXPECT_OK(hold.Release());
  // The standby alone: it cannot LISTEN (or write) during recovery.
  absl::StatusOr<std::unique_ptr<LockClient>> standby = Connect(
      absl::StrCat("postgres://postgres@127.0.0.1:", pair_->standby().port(),
                   "/postgres?namespace=", ns_));
  EXPECT_CODE(standby, kUnavailable);
  std::cout << "FAILOVER a standby alone: " << standby.status().message()
            << std::endl;
}

// Waiters ride out the failover (issue 19 §6): workers contend with
// Acquire(wait 60s) while the primary is killed and the standby promoted;
// until it is, every attempt meets Unavailable (connection refused, a
// standby not yet promoted). None returns an error, nobody holds the lock
// twice, and the tokens keep rising.
TEST_F(PostgresFailoverTest, SynchronousWaitersRideOutTheFailover) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*synchronous=*/true));
  ContentionOptions options;
  options.lease = kWatchdogLease;
  Contention contention([&](int) { return pair_->Uri(ns_, "mode=lease"); },
                        options);
  ASSERT_TRUE(contention.WaitForGrants(10, absl::Seconds(30)))
      << "the workers never got going";
  contention.MarkFault();
  const absl::Time killed_at = absl::Now();
  const absl::Time promoted_at = FailOver();
  const int before = contention.grants();
  ASSERT_TRUE(
      contention.WaitForGrants(before + 2 * options.workers, absl::Seconds(60)))
      << "the workers stopped getting the lock after the failover";
  const ContentionReport report = contention.Stop();
  std::cout << "FAILOVER synchronous lease, " << options.workers
            << " waiters with wait 60s: promoted "
            << Ms(promoted_at - killed_at) << " after the kill, "
            << report.Summary() << std::endl;
  ExpectRodeOut(report, 2 * options.workers);
}

// Asynchronous replication, a grant of `mode` lost with the primary.
void PostgresFailoverTest::LoseAGrant(const std::string& mode) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*synchronous=*/false));
  // Replication cut just before the grant: the standby never sees it.
  // CHECKPOINT first, so that the grant draws the first token since: that
  // draw logs the sequence anew, and the record is lost with the grant (a
  // new primary that restarted the sequence from the record before would
  // hand the same token out again).
  Contenders c;
  ASSERT_NO_FATAL_FAILURE(Contend(mode, c, /*take=*/false));
  ASSERT_OK(pair_->primary().Psql("CHECKPOINT;"));
  ASSERT_OK(pair_->WaitReplayed());
  ASSERT_OK(pair_->link().Partition());
  ASSERT_NO_FATAL_FAILURE(Take(c));
  const uint64_t lost_token = c.hold.fencing_token();

  const absl::Time killed_at = absl::Now();
  FailOver();
  // The loss reproduced: the new primary never had the grant, and gives
  // the lock to the next comer.
  absl::StatusOr<Hold> taken = TryUntilServed(*c.wanted);
  const absl::Time taken_at = absl::Now();
  ASSERT_OK(taken);
  const bool believed_at_takeover = c.hold.state() == LockState::kHeld;
  // The fence orders them: the new token is above the lost one, so once
  // the new holder has written, every write of the old one is refused.
  EXPECT_GT(taken->fencing_token(), lost_token);
  EXPECT_TRUE(c.fence.Write(taken->fencing_token()));
  EXPECT_FALSE(c.fence.Write(lost_token));
  EXPECT_FALSE(c.fence.Write(lost_token));
  EXPECT_EQ(c.fence.refused(), 2);
  // The old holder is told once its renewal finds the row gone (lease
  // mode), or at once, its session having died with the old primary.
  ASSERT_TRUE(c.watch.told.WaitForNotificationWithTimeout(kWatchdogLease))
      << "the holder of the lost grant was never told";
  const absl::Time told_at = c.watch.When();
  std::cout << "FAILOVER asynchronous " << mode << ": grants lost 1, taken "
            << "over " << Ms(taken_at - killed_at) << " after the kill, "
            << "old holder "
            << (believed_at_takeover ? "still believed then, " : "told first, ")
            << "told lost " << Ms(told_at - killed_at) << " after the kill ("
            << c.watch.reason.message() << "), tokens " << lost_token << " -> "
            << taken->fencing_token() << ", stale writes refused "
            << c.fence.refused() << " of 2" << std::endl;
}

TEST_F(PostgresFailoverTest, AsynchronousLeaseGrantIsLostAndFencedOff) {
  LoseAGrant("lease");
}

TEST_F(PostgresFailoverTest, AsynchronousSessionGrantIsLostAndFencedOff) {
  LoseAGrant("session");
}

}  // namespace
}  // namespace dlock::test
