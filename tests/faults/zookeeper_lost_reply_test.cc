// Copyright dlock authors. zk:// requests whose replies are lost with the
// connection (a FaultProxy drops them, then resets the connection; or the
// server is paused): the client must find out what happened on ZooKeeper
// without taking someone else's node, or someone else's delete, for its own.
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "fault_proxy.h"
#include "gtest/gtest.h"
#include "status_testing.h"
#include "zookeeper_fault_helpers.h"
#include "zookeeper_server.h"

namespace dlock::test {
namespace {

// Two processes configured with the same client id (ClientOptions::client_id)
// name their lock nodes alike. When one loses a create's reply and cannot
// reconnect in time, its background cleanup removes the nodes it may have
// created: it must never remove the other's node, which holds the lock.
TEST(ZooKeeperLostReply, SameClientIdNeverRemovesTheOthersNode) {
  constexpr char kClientId[] = "0123456789abcdef0123456789abcdef";
  constexpr char kName[] = "one client id, two processes";
  absl::StatusOr<std::unique_ptr<ZooKeeperServer>> server =
      ZooKeeperServer::Start();
  ASSERT_OK(server);
  ClientOptions same_id;
  same_id.client_id = kClientId;
  // The holder's session outlives the pause below by far.
  absl::StatusOr<std::unique_ptr<LockClient>> holder =
      Connect((*server)->Uri("same-id", "session_timeout=30s"), same_id);
  ASSERT_OK(holder);
  auto held = (*holder)->GetLock(kName);
  ASSERT_OK(held);
  absl::StatusOr<Hold> holding = (*held)->TryAcquire();
  ASSERT_OK(holding);

  // The other gives up on a silent server after 2/3 of its 3 s session.
  absl::StatusOr<std::unique_ptr<LockClient>> other =
      Connect((*server)->Uri("same-id", "session_timeout=3s"), same_id);
  ASSERT_OK(other);
  auto contended = (*other)->GetLock(kName);
  ASSERT_OK(contended);
  (*server)->PauseMember(0);
  // Its create goes out and no reply comes: one attempt, so it cannot wait
  // for the reconnect and leaves the cleanup to the background.
  const absl::StatusOr<Hold> lost_reply = (*contended)->TryAcquire();
  (*server)->ResumeMember(0);
  EXPECT_TRUE(absl::IsUnavailable(lost_reply.status())) << lost_reply.status();

  // Once it is connected again, its cleanup runs within a few ticks.
  const absl::Time resumed = absl::Now();
  absl::StatusOr<LockInfo> info = (*other)->Admin().Inspect(kName);
  while (!info.ok() && absl::Now() - resumed < absl::Seconds(30)) {
    absl::SleepFor(absl::Milliseconds(50));
    info = (*other)->Admin().Inspect(kName);
  }
  ASSERT_OK(info);
  const absl::Time connected = absl::Now();
  while (info.ok() && info->locked &&
         absl::Now() - connected < absl::Seconds(3)) {
    absl::SleepFor(absl::Milliseconds(50));
    info = (*other)->Admin().Inspect(kName);
  }
  ASSERT_OK(info);
  EXPECT_TRUE(info->locked) << "the other's cleanup removed the holder's node";
  EXPECT_EQ(info->owner, (*holder)->CurrentOwner());
  EXPECT_EQ(holding->state(), LockState::kHeld);

  absl::StatusOr<std::unique_ptr<LockClient>> third =
      Connect((*server)->Uri("same-id"));
  ASSERT_OK(third);
  auto lock = (*third)->GetLock(kName);
  ASSERT_OK(lock);
  const absl::StatusOr<Hold> taken = (*lock)->TryAcquire();
  EXPECT_TRUE(absl::IsDeadlineExceeded(taken.status()))
      << "a third owner got the lock while the holder believes it holds it: "
      << taken.status();
  EXPECT_OK(holding->Release());
}

// A server, a proxy in front of it, and a client `near` that reaches the
// server directly.
class LostReplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<ZooKeeperServer>> started =
        ZooKeeperServer::Start();
    ASSERT_OK(started);
    server_ = *std::move(started);
    ASSERT_OK(proxy_.Start("127.0.0.1", server_->client_port(0)));
    absl::StatusOr<std::unique_ptr<LockClient>> near =
        Connect(server_->Uri(kNs));
    ASSERT_OK(near);
    near_ = *std::move(near);
    raw_ = std::make_unique<RawZooKeeper>(server_->Hosts());
  }

  // A client through the proxy.
  std::unique_ptr<LockClient> Far() {
    absl::StatusOr<std::unique_ptr<LockClient>> far =
        Connect(UriAt(proxy_.port(), kNs));
    EXPECT_OK(far);
    return far.ok() ? *std::move(far) : nullptr;
  }

  static constexpr char kNs[] = "lost-reply";
  std::unique_ptr<ZooKeeperServer> server_;
  FaultProxy proxy_;
  std::unique_ptr<LockClient> near_;
  std::unique_ptr<RawZooKeeper> raw_;
};

// Defect: a node adopted after its create's reply was lost kept the mtime of
// its creation, so its lease on ZooKeeper could be over (others may remove
// it) by the time the client took it as a fresh hold. The adopted node is
// written again, and the hold counts from that write.
TEST_F(LostReplyTest, NodeAdoptedAfterALostCreateStartsAFreshLease) {
  constexpr char kName[] = "adopted";
  constexpr absl::Duration kLease = absl::Seconds(2);
  std::unique_ptr<LockClient> far = Far();
  ASSERT_NE(far, nullptr);
  auto lock = far->GetLock(kName);
  ASSERT_OK(lock);
  // The lock's parent exists (and, persistent, stays), so that the create
  // below succeeds at once.
  ASSERT_TRUE(raw_->CreatePath(LockParent(kNs, kName)));
  proxy_.SetFault(Direction::kReplies, Fault::Drop());
  Background<absl::StatusOr<Hold>> acquire([&] {
    AcquireOptions options;
    options.owner_token = "adopter";
    options.lease = kLease;
    options.wait = absl::Seconds(30);
    return (*lock)->Acquire(options);
  });
  // The create happened; its reply is gone. The connection stays silent
  // past the lease, then breaks, and the client reconnects.
  ASSERT_TRUE(
      raw_->WaitForChildren(LockParent(kNs, kName), 1, absl::Seconds(10)));
  absl::SleepFor(kLease + absl::Seconds(1));
  proxy_.SetFault(Direction::kReplies, Fault::Pass());
  proxy_.ResetAll();
  absl::StatusOr<Hold>* got = acquire.Wait(absl::Seconds(30));
  ASSERT_TRUE(got != nullptr) << "the acquire did not return";
  ASSERT_OK(*got);

  // ZooKeeper counts a fresh lease too: others see it held, and cannot
  // remove the node as expired.
  auto near_lock = near_->GetLock(kName);
  ASSERT_OK(near_lock);
  absl::StatusOr<LockInfo> info = near_->Admin().Inspect((*near_lock)->name());
  ASSERT_OK(info);
  EXPECT_TRUE(info->locked);
  EXPECT_EQ(info->owner, "t:adopter");
  EXPECT_GT(info->remaining_lease, kLease / 2);
  EXPECT_TRUE(absl::IsDeadlineExceeded((*near_lock)->TryAcquire().status()));
  EXPECT_EQ(far->OwnerTokens().State(kName, "adopter"), LockState::kHeld);
  EXPECT_OK((*got)->Release());
}

// Defect: a release whose delete got no reply took a later NONODE as its
// own success, although the delete never ran and a successor had removed
// the node after its lease ran out: C4 wants FailedPrecondition.
TEST_F(LostReplyTest, ReleaseAfterASuccessorRemovedTheExpiredNodeFails) {
  constexpr char kName[] = "taken-over";
  constexpr absl::Duration kLease = absl::Milliseconds(1500);
  std::unique_ptr<LockClient> far = Far();
  ASSERT_NE(far, nullptr);
  auto lock = far->GetLock(kName);
  ASSERT_OK(lock);
  AcquireOptions short_lease;
  short_lease.owner_token = "releaser";
  short_lease.lease = kLease;
  absl::StatusOr<Hold> releaser = (*lock)->TryAcquire(short_lease);
  ASSERT_OK(releaser);
  auto near_lock = near_->GetLock(kName);
  ASSERT_OK(near_lock);
  Background<absl::StatusOr<Hold>> successor([&] {
    AcquireOptions options;
    options.owner_token = "successor";
    options.lease = absl::Seconds(60);
    options.wait = absl::Seconds(30);
    return (*near_lock)->Acquire(options);
  });
  ASSERT_TRUE(
      raw_->WaitForChildren(LockParent(kNs, kName), 2, absl::Seconds(10)));

  // The delete never reaches ZooKeeper, and no reply comes.
  const uint64_t sent_before = proxy_.stats().requests.received;
  proxy_.SetFault(Direction::kRequests, Fault::Drop());
  Background<absl::Status> release([&] { return releaser->Release(); });
  ASSERT_OK(proxy_.WaitForReceived(Direction::kRequests, sent_before + 1,
                                   absl::Seconds(5)));
  // The lease runs out on ZooKeeper, and the successor removes the node.
  absl::StatusOr<Hold>* taken = successor.Wait(absl::Seconds(30));
  ASSERT_TRUE(taken != nullptr) << "the successor did not return";
  ASSERT_OK(*taken);
  // The connection breaks; the client reconnects and finds its node gone.
  proxy_.SetFault(Direction::kRequests, Fault::Pass());
  proxy_.ResetAll();
  absl::Status* released = release.Wait(absl::Seconds(30));
  ASSERT_TRUE(released != nullptr) << "the release did not return";
  EXPECT_TRUE(absl::IsFailedPrecondition(*released))
      << "a release that never ran reported: " << *released;

  absl::StatusOr<LockInfo> info = near_->Admin().Inspect((*near_lock)->name());
  ASSERT_OK(info);
  EXPECT_EQ(info->owner, "t:successor");
  EXPECT_EQ(info->fencing_token, (*taken)->fencing_token());
  EXPECT_OK((*taken)->Release());
}

// The other side of the same rule: a delete that did run, whose reply alone
// was lost, is the release it was meant to be.
TEST_F(LostReplyTest, ReleaseWhoseReplyAloneWasLostSucceeds) {
  constexpr char kName[] = "released";
  std::unique_ptr<LockClient> far = Far();
  ASSERT_NE(far, nullptr);
  auto lock = far->GetLock(kName);
  ASSERT_OK(lock);
  AcquireOptions options;
  options.owner_token = "releaser";
  options.lease = absl::Seconds(30);
  absl::StatusOr<Hold> releaser = (*lock)->TryAcquire(options);
  ASSERT_OK(releaser);
  proxy_.SetFault(Direction::kReplies, Fault::Drop());
  Background<absl::Status> release([&] { return releaser->Release(); });
  ASSERT_TRUE(
      raw_->WaitForChildren(LockParent(kNs, kName), 0, absl::Seconds(10)));
  proxy_.SetFault(Direction::kReplies, Fault::Pass());
  proxy_.ResetAll();
  absl::Status* released = release.Wait(absl::Seconds(30));
  ASSERT_TRUE(released != nullptr) << "the release did not return";
  EXPECT_OK(*released);
  auto near_lock = near_->GetLock(kName);
  ASSERT_OK(near_lock);
  EXPECT_OK((*near_lock)->TryAcquire());
}

}  // namespace
}  // namespace dlock::test
