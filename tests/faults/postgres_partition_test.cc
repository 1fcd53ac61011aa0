// Copyright dlock authors. Session mode behind a partition (C19): the
// holder's session is ended on the server while a proxy swallows everything
// between them, the server's FIN included, so the holder cannot hear of it.
// Nobody may be granted the lock while the holder still believes it holds;
// and a dead session must still free the lock about a grace after it died,
// far sooner than the lease, or session mode would lose its point.
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "dlock/dlock.h"
#include "fault_proxy.h"
#include "gtest/gtest.h"
#include "postgres_server.h"
#include "postgres_suite.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

class PostgresPartitionTest : public PostgresSuite {};

// session_grace when the URI gives none (docs/postgres.md).
constexpr absl::Duration kDefaultGrace = absl::Seconds(3);
constexpr absl::Duration kLease = absl::Seconds(60);
// For a loaded 2-core machine: scheduling, psql, a statement or two.
constexpr absl::Duration kSlack = absl::Seconds(3);

struct LostNotice {
  absl::Notification told;
  absl::Mutex mu;
  absl::Time at;
  absl::Status reason;
};

TEST_F(PostgresPartitionTest, NoTakeoverWhileTheCutOffHolderBelieves) {
  FaultProxy proxy;
  ASSERT_OK(proxy.Start("127.0.0.1", server_->port()));
  const std::string app = "dlock_partitioned_holder";
  auto notice = std::make_shared<LostNotice>();
  ClientOptions holder_options;
  holder_options.on_lost = [notice](const LockLostEvent& e) {
    absl::MutexLock lock(&notice->mu);
    if (notice->told.HasBeenNotified()) return;
    notice->at = absl::Now();
    notice->reason = e.reason;
    notice->told.Notify();
  };
  absl::StatusOr<std::unique_ptr<LockClient>> holder =
      Connect(server_->UriAt(proxy.port(), "partition",
                             "mode=session&application_name=" + app),
              holder_options);
  ASSERT_OK(holder);
  absl::StatusOr<std::unique_ptr<LockClient>> other =
      Connect(server_->Uri("partition", "mode=session"));
  ASSERT_OK(other);
  auto held = *(*holder)->GetLock("behind a partition");
  auto wanted = *(*other)->GetLock("behind a partition");
  AcquireOptions long_lease;
  long_lease.lease = kLease;  // no watchdog: nothing renews on its own
  absl::StatusOr<Hold> first = held->Acquire(long_lease);
  ASSERT_OK(first);
  // Some time in the hold, as in real use.
  absl::SleepFor(absl::Seconds(1));
  ASSERT_EQ(first->state(), LockState::kHeld);

  // The network goes silent; then the server ends the holder's sessions.
  // Their FATAL and FIN reach the proxy, which keeps them.
  ASSERT_OK(proxy.Partition());
  absl::StatusOr<int> ended = server_->TerminateBackends(app);
  ASSERT_OK(ended);
  ASSERT_GE(*ended, 1);
  const absl::Time terminated_at = absl::Now();

  AcquireOptions wait = long_lease;
  wait.wait = kLease / 2;
  absl::StatusOr<Hold> taken = wanted->Acquire(wait);
  // Read at once: whatever the holder believes now, it believed when the
  // other was granted.
  const LockState holder_state = first->state();
  const bool holder_told = notice->told.HasBeenNotified();
  const absl::Time taken_at = absl::Now();
  ASSERT_OK(taken);
  EXPECT_GT(taken->fencing_token(), first->fencing_token());

  EXPECT_EQ(holder_state, LockState::kLost)
      << "another client was granted the lock "
      << absl::FormatDuration(taken_at - terminated_at)
      << " after the holder's session ended, while the holder, cut off from "
         "the server, still said it held it";
  EXPECT_TRUE(holder_told) << "the holder's on_lost had not run";
  if (holder_told) {
    absl::MutexLock lock(&notice->mu);
    EXPECT_LE(notice->at, taken_at);
    EXPECT_FALSE(notice->reason.ok());
  }
  // Session mode keeps its point: a dead session frees the lock within about
  // the grace (plus the waiter's fallback poll), not after the 60s lease.
  EXPECT_LT(taken_at - terminated_at,
            kDefaultGrace + ClientOptions().fallback_poll + kSlack);

  EXPECT_OK(taken->Release());
  ASSERT_OK(proxy.Heal());
  EXPECT_EQ(first->Release().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace dlock::test
