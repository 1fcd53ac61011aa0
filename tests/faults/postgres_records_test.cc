// Copyright dlock authors. Session mode keeps each hold's session as the
// hold's record (dlock/backend/backend.h), with no table of its own from a
// name and owner to a session. What that changes: the core may drop the
// record of a session that still holds its advisory lock (an owner token's
// last release in this client while another client holds it too; two
// threads of one client acquiring one token at once, where the later
// grant's record replaces the earlier one's; an acquisition whose reply was
// lost). The session must then let go of the advisory lock, at once or by
// the end of its lease, and the hold that goes on must not suffer for it.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/dlock.h"
#include "fault_backend.h"
#include "gtest/gtest.h"
#include "postgres_server.h"
#include "postgres_suite.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

class PostgresRecordsTest : public PostgresSuite {
 protected:
  // Advisory locks held by the sessions of clients named `app`; -1 when
  // psql fails.
  static int AdvisoryLocksOf(const std::string& app) {
    absl::StatusOr<std::string> out = server_->Psql(absl::StrCat(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
        "WHERE l.locktype = 'advisory' AND a.application_name = $a$",
        app, "$a$;"));
    int n = -1;
    if (!out.ok() || !absl::SimpleAtoi(*out, &n)) return -1;
    return n;
  }

  // Whether the count comes down to `want` within a few seconds (the keeper
  // lets go of a retired session on its own thread, by its lease's end).
  static bool AdvisoryLocksReach(const std::string& app, int want) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (absl::Now() < give_up) {
      if (AdvisoryLocksOf(app) == want) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return AdvisoryLocksOf(app) == want;
  }

  static std::unique_ptr<LockClient> SessionClient(const std::string& app,
                                                   ClientOptions options = {}) {
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        Connect(server_->Uri("records", "mode=session&application_name=" + app),
                std::move(options));
    EXPECT_OK(client);
    return client.ok() ? *std::move(client) : nullptr;
  }
};

TEST_F(PostgresRecordsTest, LastReleaseOfASharedTokenLetsGoOfTheSession) {
  const std::string app_a = "dlock_records_a";
  const std::string app_b = "dlock_records_b";
  std::unique_ptr<LockClient> a = SessionClient(app_a);
  std::unique_ptr<LockClient> b = SessionClient(app_b);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> in_a,
                       a->GetLock("shared token"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> in_b,
                       b->GetLock("shared token"));
  AcquireOptions by_token;
  by_token.owner_token = "job-7";
  by_token.wait = absl::Seconds(10);

  ASSERT_OK_AND_ASSIGN(Hold held_a, in_a->Acquire(by_token));
  // The same owner from another client: a re-entry, on a session of B's.
  ASSERT_OK_AND_ASSIGN(Hold held_b, in_b->Acquire(by_token));
  EXPECT_EQ(held_b.fencing_token(), held_a.fencing_token());
  EXPECT_EQ(AdvisoryLocksOf(app_a), 1);
  EXPECT_EQ(AdvisoryLocksOf(app_b), 1);

  // A's last hold goes; B's stays, on the row and on B's session, and A's
  // session lets go of its advisory lock.
  ASSERT_OK(held_a.Release());
  ASSERT_OK_AND_ASSIGN(LockInfo info, b->Admin().Inspect("shared token"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_EQ(held_b.state(), LockState::kHeld);
  EXPECT_TRUE(AdvisoryLocksReach(app_a, 0)) << AdvisoryLocksOf(app_a);
  EXPECT_EQ(AdvisoryLocksOf(app_b), 1);

  // A's connection went back clean: A takes another lock on it and lets go.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> other,
                       a->GetLock("another"));
  ASSERT_OK_AND_ASSIGN(Hold again, other->Acquire(by_token));
  ASSERT_OK(again.Release());

  ASSERT_OK(held_b.Release());
  ASSERT_OK_AND_ASSIGN(info, a->Admin().Inspect("shared token"));
  EXPECT_FALSE(info.locked);
  EXPECT_TRUE(AdvisoryLocksReach(app_a, 0)) << AdvisoryLocksOf(app_a);
  EXPECT_TRUE(AdvisoryLocksReach(app_b, 0)) << AdvisoryLocksOf(app_b);
}

TEST_F(PostgresRecordsTest, ThreadsOfOneClientShareOneTokensHold) {
  const std::string app = "dlock_records_threads";
  auto lost = std::make_shared<std::atomic<int>>(0);
  ClientOptions options;
  options.on_lost = [lost](const LockLostEvent&) { ++*lost; };
  std::unique_ptr<LockClient> client = SessionClient(app, options);
  ASSERT_NE(client, nullptr);

  // Threads start together and often find no hold of the token in the
  // client: their acquisitions then run on sessions of their own, and the
  // core keeps the later grant's record. The earlier session stays until
  // its lease is over: a short one.
  constexpr int kThreads = 4;
  constexpr int kRounds = 40;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
          client->GetLock("one token");
      if (!lock.ok()) {
        ++failures;
        return;
      }
      AcquireOptions by_token;
      by_token.owner_token = "shared";
      by_token.wait = absl::Seconds(10);
      by_token.lease = absl::Seconds(2);
      for (int i = 0; i < kRounds; ++i) {
        absl::StatusOr<Hold> hold = (*lock)->Acquire(by_token);
        if (!hold.ok()) {
          ++failures;
          ADD_FAILURE() << "thread " << t << " round " << i << ": "
                        << hold.status();
          continue;
        }
        if (hold->state() != LockState::kHeld) ++failures;
        absl::SleepFor(absl::Milliseconds((i + t) % 3));
        if (absl::Status s = hold->Release(); !s.ok()) {
          ++failures;
          ADD_FAILURE() << "thread " << t << " round " << i << ": " << s;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(lost->load(), 0);
  ASSERT_OK_AND_ASSIGN(LockInfo info, client->Admin().Inspect("one token"));
  EXPECT_FALSE(info.locked) << info.owner << " " << info.hold_count;
  EXPECT_TRUE(AdvisoryLocksReach(app, 0)) << AdvisoryLocksOf(app);
}

TEST_F(PostgresRecordsTest, RetryAfterALostReplyReentersAndTheSessionLetsGo) {
  const std::string app = "dlock_records_lost_reply";
  auto faults = std::make_shared<FaultPlan>();
  ClientOptions options;
  options.backend_decorator = faults->Decorator();
  std::unique_ptr<LockClient> client = SessionClient(app, options);
  std::unique_ptr<LockClient> other = SessionClient("dlock_records_other");
  ASSERT_NE(client, nullptr);
  ASSERT_NE(other, nullptr);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> lock,
                       client->GetLock("reply lost"));
  AcquireOptions try_once;
  try_once.wait = absl::ZeroDuration();
  try_once.lease = absl::Seconds(2);

  // Granted on a session of its own, but the core never gets the record.
  faults->Set(FaultPlan::kAcquire, {.fail_after = true, .times = 1});
  EXPECT_CODE(lock->Acquire(try_once), kUnavailable);
  EXPECT_EQ(AdvisoryLocksOf(app), 1);
  // That session stays for the lease, so the retry is a re-entry, at once,
  // and the owner's one release frees the lock.
  ASSERT_OK_AND_ASSIGN(Hold retried, lock->Acquire(try_once));
  EXPECT_EQ(retried.hold_count(), 1);
  ASSERT_OK(retried.Release());
  ASSERT_OK_AND_ASSIGN(LockInfo info, other->Admin().Inspect("reply lost"));
  EXPECT_FALSE(info.locked) << info.owner << " " << info.hold_count;
  // Then the lost grant's session lets go.
  EXPECT_TRUE(AdvisoryLocksReach(app, 0)) << AdvisoryLocksOf(app);
}

}  // namespace
}  // namespace dlock::test
