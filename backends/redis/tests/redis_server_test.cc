// Copyright dlock authors. The throwaway redis-server of the tests
// (integration/redis_server.h) with persistence: what fault-injection tests
// rely on when they kill -9 a master and start it again.
#include "redis_server.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

TEST(RedisServer, PersistentServerKeepsLocksAndTokensAcrossKillNine) {
  absl::StatusOr<std::unique_ptr<test::RedisServer>> server =
      test::RedisServer::Start({.persistence = true});
  ASSERT_OK(server);
  const int port = (*server)->port();
  // Kept open to the end: closing it would release lock a.
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect((*server)->Uri("durable"));
  ASSERT_OK(client);
  std::vector<Hold> holds;
  for (const char* name : {"a", "b"}) {
    absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
        (*client)->GetLock(name);
    ASSERT_OK(lock);
    absl::StatusOr<Hold> hold = (*lock)->Acquire({.lease = absl::Seconds(120)});
    ASSERT_OK(hold);
    holds.push_back(*std::move(hold));
  }
  ASSERT_OK(holds[1].Release());  // b

  (*server)->Kill();  // no shutdown, no final fsync
  ASSERT_OK((*server)->StartServer());
  EXPECT_EQ((*server)->port(), port);
  // Lock a's key and the layout's mark came back; b stays released.
  EXPECT_EQ(*(*server)->RawCommand({"EXISTS", "dlock:{durable:a}"}), ":1\r\n");
  EXPECT_EQ(*(*server)->RawCommand({"EXISTS", "dlock:{durable:b}"}), ":0\r\n");
  EXPECT_EQ(*(*server)->RawCommand({"GET", "dlock:durable:fence"}),
            "$36\r\ndlock-v3 layout; no 0.2 locks remain\r\n");

  // A graceful restart keeps them too, on the same port.
  ASSERT_OK((*server)->Restart());
  EXPECT_EQ((*server)->port(), port);
  EXPECT_EQ(*(*server)->RawCommand({"EXISTS", "dlock:{durable:a}"}), ":1\r\n");
  absl::StatusOr<std::unique_ptr<LockClient>> other =
      Connect((*server)->Uri("durable"));
  ASSERT_OK(other);
  absl::StatusOr<std::unique_ptr<DistributedLock>> c = (*other)->GetLock("c");
  ASSERT_OK(c);
  absl::StatusOr<Hold> held = (*c)->TryAcquire();
  ASSERT_OK(held);
  EXPECT_GT(held->fencing_token(), holds[0].fencing_token())
      << "tokens went on from before the kill";
}

TEST(RedisServer, WithoutPersistenceRestartForgetsEverything) {
  absl::StatusOr<std::unique_ptr<test::RedisServer>> server =
      test::RedisServer::Start();
  ASSERT_OK(server);
  const int port = (*server)->port();
  ASSERT_EQ(*(*server)->RawCommand({"SET", "k", "v"}), "+OK\r\n");
  (*server)->Kill();
  ASSERT_OK((*server)->StartServer());
  EXPECT_EQ((*server)->port(), port);
  EXPECT_EQ(*(*server)->RawCommand({"DBSIZE"}), ":0\r\n");
}

}  // namespace
}  // namespace dlock
