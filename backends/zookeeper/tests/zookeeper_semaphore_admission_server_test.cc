// Copyright dlock authors. The zk:// semaphore's admission (C22) against a
// real ZooKeeper: a node that the permits queued ahead of it leave room for
// is admitted from its own look at the queue, without waiting for the
// waiters ahead to admit themselves one after another (issue 24's convoy:
// 16 threads on a semaphore of 1000 got about 30 permits a second).
// The C client's blocking calls, as zookeeper_mt offers them.
#define THREADED
#include <zookeeper/zookeeper.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "dlock/cancel.h"
#include "dlock/client.h"
#include "dlock/errors.h"
#include "dlock/semaphore.h"
#include "gtest/gtest.h"
#include "test_servers.h"
#include "zk_four_letter.h"
#include "zk_layout.h"

namespace dlock::zk {
namespace {

constexpr int64_t kLimit = 1000;

// A raw client of the test's ZooKeeper, to queue a waiter that never acts:
// a node created (waiting, "w") whose process stopped before it looked at
// the queue again.
class RawClient {
 public:
  explicit RawClient(int port) {
    const std::string hosts = absl::StrCat("127.0.0.1:", port);
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zh_ = zookeeper_init(hosts.c_str(), nullptr, 30000, nullptr, nullptr, 0);
  }
  ~RawClient() {
    if (zh_ != nullptr) zookeeper_close(zh_);
  }
  // Creates `path`, or finds it there: ZOK. Sequential nodes: the created
  // path in `created`.
  int Create(const std::string& path, const std::string& data, int mode,
             std::string* created = nullptr) {
    char buffer[512] = {0};
    int rc = ZCONNECTIONLOSS;
    for (int i = 0; i < 50 && rc == ZCONNECTIONLOSS; ++i) {
      rc = zoo_create(zh_, path.c_str(), data.data(),
                      static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE, mode,
                      buffer, sizeof(buffer));
      if (rc == ZCONNECTIONLOSS) absl::SleepFor(absl::Milliseconds(100));
    }
    if (created != nullptr) *created = buffer;
    return rc == ZNODEEXISTS ? ZOK : rc;
  }
  std::optional<std::pair<std::string, Stat>> Get(const std::string& path) {
    char buffer[1024];
    int len = sizeof(buffer);
    Stat stat{};
    if (zoo_get(zh_, path.c_str(), 0, buffer, &len, &stat) != ZOK) {
      return std::nullopt;
    }
    return std::make_pair(std::string(buffer, len < 0 ? 0 : len), stat);
  }

 private:
  zhandle_t* zh_ = nullptr;
};

TEST(ZooKeeperSemaphoreAdmission, RoomAheadAdmitsWithoutWaitingForTheWaiters) {
  absl::StatusOr<test::TestBackend> backend =
      test::FindTestBackend("zookeeper");
  ASSERT_TRUE(backend.ok()) << backend.status();
  const std::string ns = "semaphore-admission";
  absl::StatusOr<std::string> uri = backend->uri({.ns = ns});
  ASSERT_TRUE(uri.ok()) << uri.status();
  absl::StatusOr<int> port = backend->port();
  ASSERT_TRUE(port.ok()) << port.status();

  // A waiter for one permit that stopped right after queueing: ahead of us,
  // never admitting itself, with a lease far beyond the test.
  RawClient raw(*port);
  const std::string name = "convoy";
  const std::string parent = absl::StrCat(
      "/dlock/", ns, "/", ObjectComponent(ObjectKind::kSemaphore, name));
  ASSERT_EQ(raw.Create("/dlock", "", ZOO_PERSISTENT), ZOK);
  ASSERT_EQ(raw.Create(absl::StrCat("/dlock/", ns), "", ZOO_CONTAINER), ZOK);
  ASSERT_EQ(raw.Create(parent, "", ZOO_CONTAINER), ZOK);
  const std::string stalled_data = Serialize(NodeData{.owner = "c:stalled:1",
                                                      .holds = 1,
                                                      .lease_ms = 600'000,
                                                      .kept_ms = 600'000,
                                                      .value = WaitingValue()});
  std::string stalled;
  ASSERT_EQ(raw.Create(absl::StrCat(parent, "/stalled-0-0-",
                                    PermitsTag({.permits = 1, .limit = kLimit}),
                                    "lock-"),
                       stalled_data, ZOO_EPHEMERAL_SEQUENTIAL, &stalled),
            ZOK);

  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(*uri);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::unique_ptr<Semaphore>> semaphore =
      (*client)->GetSemaphore(name, kLimit);
  ASSERT_TRUE(semaphore.ok()) << semaphore.status();
  // One attempt: 1 + 1 permits of 1000 fit, so ours is admitted at once;
  // before, it waited for the stalled node to admit itself first.
  absl::StatusOr<Permit> permit = (*semaphore)->TryAcquire(1);
  ASSERT_TRUE(permit.ok()) << permit.status();

  // In queue order still: the node ahead is admitted with ours (its permit
  // counted, a slot of its own), and our token exceeds its czxid.
  std::optional<std::pair<std::string, Stat>> ahead = raw.Get(stalled);
  ASSERT_TRUE(ahead.has_value());
  std::optional<NodeData> data = Parse(ahead->first);
  ASSERT_TRUE(data.has_value());
  std::optional<std::vector<int64_t>> slots = AdmittedSlots(data->value);
  ASSERT_TRUE(slots.has_value()) << ahead->first;
  ASSERT_EQ(slots->size(), 1u);
  ASSERT_EQ(permit->slots().size(), 1u);
  EXPECT_NE((*slots)[0], permit->slots()[0]);
  EXPECT_GT(permit->hold().fencing_token(),
            static_cast<uint64_t>(ahead->second.czxid));
  EXPECT_EQ(data->owner, "c:stalled:1") << "its owner's data is kept";
  EXPECT_TRUE(permit->Release().ok());
  EXPECT_TRUE((*client)->Close().ok());
}

// The requests the test's ZooKeeper has received so far (mntr).
int64_t PacketsReceived(int port) {
  absl::StatusOr<std::string> mntr = FourLetterWord(
      absl::StrCat("127.0.0.1:", port), "mntr", absl::Seconds(5));
  if (!mntr.ok()) return -1;
  return MntrValue(*mntr, "zk_packets_received").value_or(-1);
}

// A queue node ahead whose data is not a dlock node's (another program's,
// or a dlock node's overwritten since), with an admitted holder between it
// and ours: we can neither admit it with ours nor tell when it ends, so, as
// a lock's waiter behind such a node, ours waits on the watches and the
// fallback poll, and gives up at its deadline. Before, every look at the
// queue went straight back to another listing: the waiter spun on the
// server, and never looked at its deadline.
TEST(ZooKeeperSemaphoreAdmission, ForeignNodeAheadIsWaitedForUntilTheDeadline) {
  absl::StatusOr<test::TestBackend> backend =
      test::FindTestBackend("zookeeper");
  ASSERT_TRUE(backend.ok()) << backend.status();
  const std::string ns = "semaphore-foreign";
  absl::StatusOr<std::string> uri = backend->uri({.ns = ns});
  ASSERT_TRUE(uri.ok()) << uri.status();
  absl::StatusOr<int> port = backend->port();
  ASSERT_TRUE(port.ok()) << port.status();

  constexpr int64_t kThree = 3;
  RawClient raw(*port);
  const std::string name = "foreign";
  const std::string parent = absl::StrCat(
      "/dlock/", ns, "/", ObjectComponent(ObjectKind::kSemaphore, name));
  ASSERT_EQ(raw.Create("/dlock", "", ZOO_PERSISTENT), ZOK);
  ASSERT_EQ(raw.Create(absl::StrCat("/dlock/", ns), "", ZOO_CONTAINER), ZOK);
  ASSERT_EQ(raw.Create(parent, "", ZOO_CONTAINER), ZOK);
  ASSERT_EQ(raw.Create(absl::StrCat(parent, "/foreign-lock-"),
                       "not a dlock node", ZOO_EPHEMERAL_SEQUENTIAL),
            ZOK);
  const std::string holder_data =
      Serialize(NodeData{.owner = "c:stopped:1",
                         .holds = 1,
                         .lease_ms = 600'000,
                         .kept_ms = 600'000,
                         .value = AdmittedValue({0})});
  ASSERT_EQ(raw.Create(absl::StrCat(parent, "/stopped-0-0-",
                                    PermitsTag({.permits = 1, .limit = kThree}),
                                    "lock-"),
                       holder_data, ZOO_EPHEMERAL_SEQUENTIAL),
            ZOK);

  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(*uri);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::unique_ptr<Semaphore>> semaphore =
      (*client)->GetSemaphore(name, kThree);
  ASSERT_TRUE(semaphore.ok()) << semaphore.status();

  const int64_t packets_before = PacketsReceived(*port);
  ASSERT_GE(packets_before, 0) << "mntr unreadable";
  CancelToken cancel;
  std::optional<absl::StatusOr<Permit>> permit;
  absl::Notification done;
  std::thread waiter([&] {
    permit.emplace((*semaphore)
                       ->Acquire(1, AcquireOptions{.wait = absl::Seconds(2),
                                                   .cancel = cancel}));
    done.Notify();
  });
  // A generous bound: only a waiter that ignores its deadline misses it.
  const bool in_time = done.WaitForNotificationWithTimeout(absl::Seconds(15));
  if (!in_time) cancel.Cancel();
  waiter.join();
  const int64_t packets = PacketsReceived(*port) - packets_before;
  EXPECT_TRUE(in_time) << "the waiter did not give up at its deadline";
  ASSERT_TRUE(permit.has_value());
  EXPECT_TRUE(IsWaitExpired(permit->status())) << permit->status();
  // A waiter on its watches and a 1 s fallback poll looks a few times in
  // 2 s, a few requests a look; the spin made thousands a second.
  EXPECT_LT(packets, 200) << "the waiter polled the server";
  EXPECT_TRUE((*client)->Close().ok());
}

TEST(ZooKeeperSemaphoreAdmission, SixteenAtOnceAllFitAndNoneWaits) {
  absl::StatusOr<test::TestBackend> backend =
      test::FindTestBackend("zookeeper");
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<std::string> uri =
      backend->uri({.ns = "semaphore-admission-16"});
  ASSERT_TRUE(uri.ok()) << uri.status();
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(*uri);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::unique_ptr<Semaphore>> semaphore =
      (*client)->GetSemaphore("sixteen", kLimit);
  ASSERT_TRUE(semaphore.ok()) << semaphore.status();
  constexpr int kThreads = 16;
  for (int round = 0; round < 3; ++round) {
    // Each thread (an owner of its own) makes one attempt, all at once:
    // 16 of 1000 permits always fit, so every attempt is granted. Before,
    // a node whose predecessor was not admitted yet was refused.
    std::vector<std::optional<absl::StatusOr<Permit>>> permits(kThreads);
    absl::Notification go;
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        go.WaitForNotification();
        permits[i].emplace((*semaphore)->TryAcquire(1));
      });
    }
    go.Notify();
    for (std::thread& thread : threads) thread.join();
    std::set<int64_t> slots;
    for (int i = 0; i < kThreads; ++i) {
      ASSERT_TRUE(permits[i]->ok()) << "round " << round << ", thread " << i
                                    << ": " << permits[i]->status();
      ASSERT_EQ((*permits[i])->slots().size(), 1u);
      slots.insert((*permits[i])->slots()[0]);
    }
    EXPECT_EQ(slots.size(), static_cast<size_t>(kThreads)) << "one slot each";
    for (int i = 0; i < kThreads; ++i) {
      EXPECT_TRUE((*permits[i])->Release().ok());
    }
  }
  EXPECT_TRUE((*client)->Close().ok());
}

}  // namespace
}  // namespace dlock::zk
