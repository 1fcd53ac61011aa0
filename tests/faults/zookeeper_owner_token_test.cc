// Copyright dlock authors. zk:// with an explicit owner token shared by two
// clients (C6): one client's waiting node reaches the head of the queue
// while that client cannot hear ZooKeeper (its replies are stalled by a
// FaultProxy), and the other client, with the same token, re-enters that
// node as the token's hold. The first client must then neither spin on the
// node's old version nor delete the node from under the second.
#include <memory>
#include <string>

#include "../../backends/zookeeper/zk_layout.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "fault_proxy.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "status_testing.h"
#include "zookeeper_fault_helpers.h"
#include "zookeeper_server.h"

namespace dlock::test {
namespace {

constexpr char kToken[] = "job-4711";
constexpr char kName[] = "shared-by-token";

// A server, a holder of another owner, and the token's two clients: `late`
// reaches ZooKeeper through the proxy, `eager` directly.
class SameTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<ZooKeeperServer>> started =
        ZooKeeperServer::Start();
    ASSERT_OK(started);
    server_ = *std::move(started);
    ASSERT_OK(proxy_.Start("127.0.0.1", server_->client_port(0)));
    const std::string ns = "token";
    for (auto* client : {&holder_, &eager_, &third_}) {
      absl::StatusOr<std::unique_ptr<LockClient>> c = Connect(server_->Uri(ns));
      ASSERT_OK(c);
      *client = *std::move(c);
    }
    // Late waits on its watch alone (no fallback poll within the test), so
    // that it learns nothing while its replies are stalled and a cancel
    // finds it waiting, not in a call.
    ClientOptions watch_only;
    watch_only.fallback_poll = absl::Seconds(60);
    absl::StatusOr<std::unique_ptr<LockClient>> late =
        Connect(UriAt(proxy_.port(), ns), watch_only);
    ASSERT_OK(late);
    late_ = *std::move(late);
    raw_ = std::make_unique<RawZooKeeper>(server_->Hosts());
    parent_ = LockParent(ns, kName);
  }

  // The lock taken by another owner, and `late` queued behind it for the
  // token, waiting at most `wait`. Returns the wait, running, once late
  // watches the holder's node; or, with `deaf_from_start`, once late's node
  // exists, late having heard nothing from ZooKeeper since it started.
  std::unique_ptr<Background<absl::StatusOr<Hold>>> QueueLateBehindHolder(
      absl::Duration wait, CancelToken cancel, bool deaf_from_start = false) {
    auto held = holder_->GetLock(kName);
    EXPECT_OK(held);
    holder_lock_ = *std::move(held);
    AcquireOptions first;
    first.lease = absl::Seconds(60);
    absl::StatusOr<Hold> held_first = holder_lock_->TryAcquire(first);
    EXPECT_OK(held_first);
    if (held_first.ok()) holder_hold_ = *std::move(held_first);
    auto lock = late_->GetLock(kName);
    EXPECT_OK(lock);
    late_lock_ = *std::move(lock);
    if (deaf_from_start) proxy_.SetFault(Direction::kReplies, Fault::Stall());
    auto queued = std::make_unique<Background<absl::StatusOr<Hold>>>(
        [lock = late_lock_.get(), wait, cancel] {
          AcquireOptions options;
          options.owner_token = kToken;
          options.wait = wait;
          options.cancel = cancel;
          return lock->Acquire(options);
        });
    EXPECT_TRUE(raw_->WaitForChildren(parent_, 2, absl::Seconds(10)))
        << "the token's waiting node did not appear";
    if (!deaf_from_start) {
      // ZooKeeper lists the paths it watches (`wchp`): late waits on the
      // holder's node, the first in the queue.
      const std::string holder_node = absl::StrCat(
          parent_, "/", zk::SortedQueue(raw_->Children(parent_))[0]);
      bool watching = false;
      for (int i = 0; i < 1000 && !watching; ++i) {
        absl::StatusOr<std::string> watched = TcpExchange(
            server_->client_port(0), "wchp", absl::Milliseconds(500));
        watching = watched.ok() && absl::StrContains(*watched, holder_node);
        if (!watching) absl::SleepFor(absl::Milliseconds(10));
      }
      EXPECT_TRUE(watching) << "late never watched " << holder_node;
    }
    return queued;
  }

  // Stalls what ZooKeeper says to `late`, frees the lock (so that late's
  // node is first), and has `eager` take it for the token: by the recipe it
  // re-enters late's node, the token's hold.
  void EagerReentersWhileLateIsDeaf() {
    proxy_.SetFault(Direction::kReplies, Fault::Stall());
    ASSERT_OK(holder_hold_.Release());
    auto lock = eager_->GetLock(kName);
    ASSERT_OK(lock);
    eager_lock_ = *std::move(lock);
    AcquireOptions options;
    options.owner_token = kToken;
    options.wait = absl::Seconds(10);
    absl::StatusOr<Hold> taken = eager_lock_->Acquire(options);
    ASSERT_OK(taken);
    eager_token_ = taken->fencing_token();
    eager_hold_ = *std::move(taken);
    ASSERT_EQ(raw_->Children(parent_).size(), 1u)
        << "eager should have re-entered late's node, not queued its own";
  }

  // Whether an owner other than the token can take the lock now.
  absl::Status ThirdTries() {
    auto lock = third_->GetLock(kName);
    if (!lock.ok()) return lock.status();
    absl::StatusOr<Hold> taken = (*lock)->TryAcquire();
    if (taken.ok()) taken->Release().IgnoreError();
    return taken.status();
  }

  std::unique_ptr<ZooKeeperServer> server_;
  FaultProxy proxy_;
  std::unique_ptr<LockClient> holder_, eager_, third_, late_;
  std::unique_ptr<DistributedLock> holder_lock_, eager_lock_, late_lock_;
  // The holder's hold, and eager's for the token.
  Hold holder_hold_, eager_hold_;
  std::unique_ptr<RawZooKeeper> raw_;
  std::string parent_;
  uint64_t eager_token_ = 0;
};

// Defect: after ZBADVERSION on its own node the waiter never reloaded the
// version, so at the head of the queue it retried the same stale write for
// ever, past its deadline.
TEST_F(SameTokenTest, WaiterAtTheHeadReloadsANodeTheTokenReentered) {
  constexpr absl::Duration kWait = absl::Seconds(8);
  CancelToken cancel;
  auto late = QueueLateBehindHolder(kWait, cancel);
  ASSERT_NO_FATAL_FAILURE(EagerReentersWhileLateIsDeaf());
  proxy_.SetFault(Direction::kReplies, Fault::Pass());

  absl::StatusOr<Hold>* got = late->Wait(kWait + absl::Seconds(10));
  if (got == nullptr) {
    cancel.Cancel();  // lets the test end
    got = late->Wait(absl::Seconds(30));
    FAIL() << "the waiter at the head of the queue ignored its deadline of "
           << absl::FormatDuration(kWait) << " (cancelled 10s past it: "
           << (got != nullptr ? got->status().ToString() : "still running")
           << ")";
  }
  // The node is the token's; late's own acquisition is one more hold on it.
  ASSERT_OK(*got);
  EXPECT_EQ((*got)->fencing_token(), eager_token_);
  EXPECT_EQ((*got)->hold_count(), 2);
  absl::StatusOr<LockInfo> info = eager_->Admin().Inspect(kName);
  ASSERT_OK(info);
  EXPECT_EQ(info->hold_count, 2);
  EXPECT_GT(info->remaining_lease, absl::Seconds(10));
  EXPECT_TRUE(absl::IsDeadlineExceeded(ThirdTries()));

  // Each client takes its own hold off; the lock is free after both.
  EXPECT_OK((*got)->Release());
  EXPECT_TRUE(absl::IsDeadlineExceeded(ThirdTries()));
  EXPECT_EQ(eager_->OwnerTokens().State(kName, kToken), LockState::kHeld);
  EXPECT_OK(eager_hold_.Release());
  EXPECT_OK(ThirdTries());
}

// The same re-entry when the waiter's predecessor is gone before the waiter
// could watch it: the waiter never sleeps, yet its node became first while
// it was not looking. It must write it again when it sees it first, and so
// learn of the re-entry, rather than take its node as it created it.
TEST_F(SameTokenTest, WaiterThatNeverSleptStillReadsTheReentry) {
  CancelToken cancel;
  auto late = QueueLateBehindHolder(absl::Seconds(8), cancel,
                                    /*deaf_from_start=*/true);
  ASSERT_NO_FATAL_FAILURE(EagerReentersWhileLateIsDeaf());
  proxy_.SetFault(Direction::kReplies, Fault::Pass());
  absl::StatusOr<Hold>* got = late->Wait(absl::Seconds(30));
  if (got == nullptr) {
    cancel.Cancel();
    late->Wait(absl::Seconds(30));
    FAIL() << "the waiter did not return";
  }
  ASSERT_OK(*got);
  EXPECT_EQ((*got)->fencing_token(), eager_token_);
  EXPECT_EQ((*got)->hold_count(), 2);
  EXPECT_OK((*got)->Release());
  EXPECT_TRUE(absl::IsDeadlineExceeded(ThirdTries()));
  EXPECT_OK(eager_hold_.Release());
  EXPECT_OK(ThirdTries());
}

// Defect: a waiter that gave up deleted its node with version -1, although
// the token's other client had re-entered it: a third owner then took the
// lock while that client said it held it.
TEST_F(SameTokenTest, WaiterThatGivesUpLeavesTheTokensHoldAlone) {
  CancelToken cancel;
  auto late = QueueLateBehindHolder(absl::Seconds(30), cancel);
  ASSERT_NO_FATAL_FAILURE(EagerReentersWhileLateIsDeaf());
  // Late gives up before it hears that its node is first.
  cancel.Cancel();
  proxy_.SetFault(Direction::kReplies, Fault::Pass());
  absl::StatusOr<Hold>* got = late->Wait(absl::Seconds(30));
  ASSERT_TRUE(got != nullptr) << "the cancelled wait did not return";
  EXPECT_TRUE(absl::IsCancelled(got->status())) << got->status();

  EXPECT_EQ(eager_->OwnerTokens().State(kName, kToken), LockState::kHeld);
  const absl::Status third = ThirdTries();
  EXPECT_TRUE(absl::IsDeadlineExceeded(third))
      << "another owner took the lock while the token's client holds it: "
      << third;
  absl::StatusOr<LockInfo> info = eager_->Admin().Inspect(kName);
  ASSERT_OK(info);
  EXPECT_TRUE(info->locked);
  EXPECT_EQ(info->fencing_token, eager_token_);
  EXPECT_EQ(info->hold_count, 1);  // late's hold is taken off, eager's stays
  EXPECT_OK(eager_hold_.Release());
  EXPECT_OK(ThirdTries());
}

}  // namespace
}  // namespace dlock::test
