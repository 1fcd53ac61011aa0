// Copyright dlock authors. A PostgreSQL restart while a lock is held. Lease
// mode keeps the row (and so the lease) through a fast shutdown, and the
// holder's watchdog renews it once it has reconnected. Session mode loses
// the hold with the session: the holder is told, and others get the lock at
// once rather than after the lease.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "postgres_server.h"
#include "postgres_suite.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

class PostgresRestartTest : public PostgresSuite {};

struct LostFlag {
  absl::Notification lost;
  absl::Mutex mu;
  absl::Status reason;
};

TEST_F(PostgresRestartTest, LeaseSurvivesAndHolderRenewsAfterReconnecting) {
  ClientOptions options;
  options.watchdog_lease = absl::Seconds(3);  // renewed every second
  auto flag = std::make_shared<LostFlag>();
  options.on_lost = [flag](const LockLostEvent& e) {
    absl::MutexLock lock(&flag->mu);
    flag->reason = e.reason;
    if (!flag->lost.HasBeenNotified()) flag->lost.Notify();
  };
  absl::StatusOr<std::unique_ptr<LockClient>> holder =
      Connect(server_->Uri("restart_lease"), options);
  ASSERT_OK(holder);
  absl::StatusOr<std::unique_ptr<LockClient>> other =
      Connect(server_->Uri("restart_lease"));
  ASSERT_OK(other);
  auto held = *(*holder)->GetLock("kept through a restart");
  auto contender = *(*other)->GetLock("kept through a restart");
  absl::StatusOr<Hold> before = held->Acquire();
  ASSERT_OK(before);

  ASSERT_OK(server_->Restart());
  // Three leases: the holder must have renewed after the restart, or the
  // row would have expired by now.
  absl::SleepFor(absl::Seconds(9));

  EXPECT_FALSE(flag->lost.HasBeenNotified()) << [&] {
    absl::MutexLock lock(&flag->mu);
    return flag->reason.ToString();
  }();
  EXPECT_EQ(before->state(), LockState::kHeld);
  absl::StatusOr<LockInfo> info = (*other)->Admin().Inspect(contender->name());
  ASSERT_OK(info);
  EXPECT_TRUE(info->locked);
  EXPECT_EQ(info->owner, (*holder)->CurrentOwner());
  EXPECT_EQ(info->fencing_token, before->fencing_token());
  EXPECT_GT(info->remaining_lease, absl::Seconds(1));
  EXPECT_EQ(contender->TryAcquire().status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_OK(before->Release());
  absl::StatusOr<Hold> after = contender->TryAcquire();
  ASSERT_OK(after);
  EXPECT_GT(after->fencing_token(), before->fencing_token());
  EXPECT_OK(after->Release());
}

TEST_F(PostgresRestartTest, SessionHolderIsToldTheLockIsLost) {
  ClientOptions options;
  options.watchdog_lease = absl::Seconds(30);  // the lease is not what ends it
  auto flag = std::make_shared<LostFlag>();
  options.on_lost = [flag](const LockLostEvent& e) {
    absl::MutexLock lock(&flag->mu);
    flag->reason = e.reason;
    if (!flag->lost.HasBeenNotified()) flag->lost.Notify();
  };
  absl::StatusOr<std::unique_ptr<LockClient>> holder =
      Connect(server_->Uri("restart_session", "mode=session"), options);
  ASSERT_OK(holder);
  auto held = *(*holder)->GetLock("lost with its session");
  absl::StatusOr<Hold> before = held->Acquire();
  ASSERT_OK(before);

  const absl::Time restarted_at = absl::Now();
  ASSERT_OK(server_->Restart());
  ASSERT_TRUE(flag->lost.WaitForNotificationWithTimeout(absl::Seconds(10)))
      << "the holder was not told";
  EXPECT_LT(absl::Now() - restarted_at, absl::Seconds(10));
  {
    absl::MutexLock lock(&flag->mu);
    EXPECT_EQ(flag->reason.code(), absl::StatusCode::kFailedPrecondition)
        << flag->reason;
  }
  EXPECT_EQ(before->state(), LockState::kLost);
  EXPECT_EQ(before->Release().code(), absl::StatusCode::kFailedPrecondition);

  // Another client gets it now, long before the 30s lease would end.
  absl::StatusOr<std::unique_ptr<LockClient>> other =
      Connect(server_->Uri("restart_session", "mode=session"));
  ASSERT_OK(other);
  auto contender = *(*other)->GetLock("lost with its session");
  AcquireOptions wait;
  wait.wait = absl::Seconds(5);
  absl::StatusOr<Hold> after = contender->Acquire(wait);
  ASSERT_OK(after);
  EXPECT_GT(after->fencing_token(), before->fencing_token());
  EXPECT_OK(after->Release());

  // And the old holder's client works again by itself.
  absl::StatusOr<Hold> again = held->Acquire(wait);
  ASSERT_OK(again);
  EXPECT_EQ(again->hold_count(), 1);
  EXPECT_OK(again->Release());
}

// Session mode's point: a holder killed with SIGKILL frees the lock within
// the session grace of the server seeing its connection close, not after its
// (long) lease.
TEST_F(PostgresRestartTest, SessionHolderKilledFreesTheLockWithinTheGrace) {
  const std::string uri =
      server_->Uri("killed_session", "mode=session&session_grace=1s");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child: take the lock for a minute, say so, and wait to be killed.
    close(ready[0]);
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
    if (!client.ok()) _exit(1);
    AcquireOptions options;
    options.lease = absl::Seconds(60);
    auto lock = *(*client)->GetLock("held by a killed process");
    // Kept until the process is killed.
    absl::StatusOr<Hold> held = lock->Acquire(options);
    if (!held.ok()) _exit(2);
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(3);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char c = 0;
  const bool child_holds = read(ready[0], &c, 1) == 1;
  close(ready[0]);
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
  ASSERT_OK(client);
  auto lock = *(*client)->GetLock("held by a killed process");
  if (child_holds) {
    EXPECT_EQ(lock->TryAcquire().status().code(),
              absl::StatusCode::kDeadlineExceeded);
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(child_holds) << "the child did not get the lock";

  const absl::Time killed_at = absl::Now();
  AcquireOptions wait;
  wait.wait = absl::Seconds(10);
  absl::StatusOr<Hold> got = lock->Acquire(wait);
  ASSERT_OK(got);
  // Within the fallback poll (1s) and the grace (1s) plus slack, far below
  // the 60s lease.
  EXPECT_LT(absl::Now() - killed_at, absl::Seconds(3));
  EXPECT_OK(got->Release());
}

}  // namespace
}  // namespace dlock::test
