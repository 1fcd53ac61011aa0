// Copyright dlock authors. zk:// requests whose replies are lost with the
// connection: the client must find out what happened on ZooKeeper without
// taking someone else's node for its own.
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "zookeeper_server.h"

namespace dlock::testing {
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
  ASSERT_TRUE(server.ok()) << server.status();
  ClientOptions same_id;
  same_id.client_id = kClientId;
  // The holder's session outlives the pause below by far.
  absl::StatusOr<std::unique_ptr<LockClient>> holder =
      Connect((*server)->Uri("same-id", "session_timeout=30s"), same_id);
  ASSERT_TRUE(holder.ok()) << holder.status();
  auto held = (*holder)->GetLock(kName);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE((*held)->TryAcquire().ok());

  // The other gives up on a silent server after 2/3 of its 3 s session.
  absl::StatusOr<std::unique_ptr<LockClient>> other =
      Connect((*server)->Uri("same-id", "session_timeout=3s"), same_id);
  ASSERT_TRUE(other.ok()) << other.status();
  auto contended = (*other)->GetLock(kName);
  ASSERT_TRUE(contended.ok());
  (*server)->PauseMember(0);
  // Its create goes out and no reply comes: one attempt, so it cannot wait
  // for the reconnect and leaves the cleanup to the background.
  const absl::StatusOr<Acquired> lost_reply = (*contended)->TryAcquire();
  (*server)->ResumeMember(0);
  EXPECT_TRUE(absl::IsUnavailable(lost_reply.status())) << lost_reply.status();

  // Once it is connected again, its cleanup runs within a few ticks.
  const absl::Time resumed = absl::Now();
  absl::StatusOr<LockInfo> info = (*contended)->Inspect();
  while (!info.ok() && absl::Now() - resumed < absl::Seconds(30)) {
    absl::SleepFor(absl::Milliseconds(50));
    info = (*contended)->Inspect();
  }
  ASSERT_TRUE(info.ok()) << info.status();
  const absl::Time connected = absl::Now();
  while (info.ok() && info->locked &&
         absl::Now() - connected < absl::Seconds(3)) {
    absl::SleepFor(absl::Milliseconds(50));
    info = (*contended)->Inspect();
  }
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->locked) << "the other's cleanup removed the holder's node";
  EXPECT_EQ(info->owner, (*holder)->CurrentOwner());
  EXPECT_EQ((*held)->State(), LockState::kHeld);

  absl::StatusOr<std::unique_ptr<LockClient>> third =
      Connect((*server)->Uri("same-id"));
  ASSERT_TRUE(third.ok()) << third.status();
  auto lock = (*third)->GetLock(kName);
  ASSERT_TRUE(lock.ok());
  const absl::StatusOr<Acquired> taken = (*lock)->TryAcquire();
  EXPECT_TRUE(absl::IsDeadlineExceeded(taken.status()))
      << "a third owner got the lock while the holder believes it holds it: "
      << taken.status();
  EXPECT_TRUE((*held)->Release().ok());
}

}  // namespace
}  // namespace dlock::testing
