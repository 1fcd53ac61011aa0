// Copyright dlock authors. What zk:// leaves in ZooKeeper: 10,000 distinct
// names locked and released leave no per-name nodes behind, and with
// auth=digest:... a client without the credential can neither delete lock
// nodes nor take the lock. Both look at ZooKeeper with the C client itself.
// The synchronous C API, which zookeeper_mt provides, is declared only for
// THREADED builds.
#ifndef THREADED
#define THREADED
#endif
#include <zookeeper/zookeeper.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "status_testing.h"
#include "zookeeper_server.h"

namespace dlock::test {
namespace {

ZooKeeperServer& Server() {
  static absl::StatusOr<std::unique_ptr<ZooKeeperServer>> server =
      ZooKeeperServer::Start();
  if (!server.ok()) {
    ADD_FAILURE() << "cannot start ZooKeeper: " << server.status();
    std::abort();
  }
  return **server;
}

void IgnoreEvents(zhandle_t*, int, int, const char*, void*) {}

// A plain C-client handle, as any other program on the ensemble would have.
class RawHandle {
 public:
  explicit RawHandle(const std::string& digest = "") {
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zh_ = zookeeper_init(Server().Hosts().c_str(), &IgnoreEvents, 10000,
                         nullptr, nullptr, 0);
    for (int i = 0; i < 200 && zoo_state(zh_) != ZOO_CONNECTED_STATE; ++i) {
      absl::SleepFor(absl::Milliseconds(25));
    }
    if (!digest.empty()) {
      zoo_add_auth(zh_, "digest", digest.data(), digest.size(), nullptr,
                   nullptr);
    }
  }
  ~RawHandle() { zookeeper_close(zh_); }
  zhandle_t* get() { return zh_; }

  // Children of `path`; -1 when it does not exist.
  int CountChildren(const std::string& path) {
    String_vector children{};
    const int rc = zoo_get_children(zh_, path.c_str(), 0, &children);
    if (rc == ZNONODE) return -1;
    EXPECT_EQ(rc, ZOK) << zerror(rc);
    const int count = children.count;
    deallocate_String_vector(&children);
    return count;
  }
  std::vector<std::string> Children(const std::string& path) {
    String_vector children{};
    std::vector<std::string> out;
    if (zoo_get_children(zh_, path.c_str(), 0, &children) != ZOK) return out;
    for (int i = 0; i < children.count; ++i) out.push_back(children.data[i]);
    deallocate_String_vector(&children);
    return out;
  }

 private:
  zhandle_t* zh_;
};

TEST(ZooKeeperNodes, TenThousandNamesLeaveNoNodesBehind) {
  constexpr int kNames = 10000;
  constexpr int kThreads = 8;
  absl::StatusOr<int64_t> baseline = Server().ZnodeCount();
  ASSERT_OK(baseline);
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect(Server().Uri("growth"));
  ASSERT_OK(client);

  const absl::Time start = absl::Now();
  std::atomic<int> next{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = next++; i < kNames; i = next++) {
        auto lock = (*client)->GetLock(absl::StrCat("job/", i, "/ünïcode"));
        AcquireOptions options;
        options.wait = absl::ZeroDuration();
        options.lease = absl::Seconds(60);
        if (!lock.ok()) {
          ++failures;
          continue;
        }
        absl::StatusOr<Hold> hold = (*lock)->Acquire(options);
        if (!hold.ok() || !hold->Release().ok()) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const absl::Duration took = absl::Now() - start;
  ASSERT_EQ(failures.load(), 0);
  std::printf("%d names locked and released in %s (%.0f pairs/s)\n", kNames,
              absl::FormatDuration(took).c_str(),
              kNames / absl::ToDoubleSeconds(took));

  // The per-name containers go once empty; then the namespace's own.
  RawHandle raw;
  const absl::Time swept_from = absl::Now();
  int left = 0;
  while (absl::Now() - swept_from < absl::Seconds(60)) {
    left = raw.CountChildren("/dlock/growth");
    if (left <= 0) break;
    absl::SleepFor(absl::Milliseconds(250));
  }
  EXPECT_LE(left, 0) << left << " per-name nodes are left";
  absl::StatusOr<int64_t> after = Server().ZnodeCount();
  ASSERT_OK(after);
  // At most /dlock and /dlock/growth beyond what the server had.
  EXPECT_LE(*after, *baseline + 2);
  std::printf("swept in %s; znodes %lld before, %lld after\n",
              absl::FormatDuration(absl::Now() - swept_from).c_str(),
              static_cast<long long>(*baseline),
              static_cast<long long>(*after));
}

// Waits until the namespace node `ns` has at most `names` per-name nodes;
// returns how many are left.
int AwaitNamesLeft(RawHandle& raw, const std::string& ns, int names) {
  const absl::Time until = absl::Now() + absl::Seconds(60);
  int left = 0;
  do {
    left = raw.CountChildren(absl::StrCat("/dlock/", ns));
    if (left <= names) break;
    absl::SleepFor(absl::Milliseconds(250));
  } while (absl::Now() < until);
  return left;
}

void KeepEach(LockClient& client, const std::string& prefix, int names,
              absl::Duration keep) {
  for (int i = 0; i < names; ++i) {
    auto lock = client.GetLock(absl::StrCat(prefix, i));
    ASSERT_OK(lock);
    absl::StatusOr<Hold> hold = (*lock)->TryAcquire();
    ASSERT_OK(hold);
    ASSERT_OK(hold->ReleaseAndKeepFor(keep));
  }
}

// A lock kept after its release leaves a node that only an acquirer of the
// same name deletes; a scheduled job's slot is never acquired again. A
// client sweeps the namespace for kept nodes long over (kept_sweep=).
TEST(ZooKeeperNodes, KeptNodesOfNamesNobodyTakesAgainAreSwept) {
  absl::StatusOr<std::unique_ptr<LockClient>> jobs =
      Connect(Server().Uri("kept-sweep"));
  ASSERT_OK(jobs);
  KeepEach(**jobs, "slot-", 20, absl::Milliseconds(200));
  RawHandle raw;
  EXPECT_EQ(raw.CountChildren("/dlock/kept-sweep"), 20);
  absl::StatusOr<std::unique_ptr<LockClient>> service =
      Connect(Server().Uri("kept-sweep", "kept_sweep=1s"));
  ASSERT_OK(service);
  EXPECT_LE(AwaitNamesLeft(raw, "kept-sweep", 0), 0);
}

// A cron-style process is often the only client there is: the one that
// kept a lock sweeps once more as it closes.
TEST(ZooKeeperNodes, AClientThatKeptSweepsAsItCloses) {
  RawHandle raw;
  absl::StatusOr<std::unique_ptr<LockClient>> earlier =
      Connect(Server().Uri("kept-close"));
  ASSERT_OK(earlier);
  KeepEach(**earlier, "old-slot-", 10, absl::Milliseconds(100));
  ASSERT_OK((*earlier)->Close());
  absl::SleepFor(absl::Seconds(5.5));  // past their end and the margin
  absl::StatusOr<std::unique_ptr<LockClient>> later =
      Connect(Server().Uri("kept-close"));
  ASSERT_OK(later);
  KeepEach(**later, "new-slot-", 1, absl::Minutes(10));
  ASSERT_OK((*later)->Close());
  EXPECT_LE(AwaitNamesLeft(raw, "kept-close", 1), 1);
  const std::vector<std::string> left = raw.Children("/dlock/kept-close");
  ASSERT_EQ(left.size(), 1u);
  EXPECT_TRUE(absl::StrContains(left[0], "new-slot-0")) << left[0];
}

// A node named like a kept lock whose data is not dlock's (another program,
// a corrupted write) keeps nothing: the first waiter looks past it, rather
// than reading it again and again until its deadline.
TEST(ZooKeeperNodes, AForeignNodeNamedLikeAKeptLockKeepsNothing) {
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect(Server().Uri("kept-foreign"));
  ASSERT_OK(client);
  auto lock = (*client)->GetLock("job");
  ASSERT_OK(lock);
  {
    absl::StatusOr<Hold> first = (*lock)->TryAcquire();
    ASSERT_OK(first);
    RawHandle raw;
    const std::string data = "not dlock's";
    ASSERT_EQ(zoo_create(raw.get(), "/dlock/kept-foreign/job/kept-12345",
                         data.data(), static_cast<int>(data.size()),
                         &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0),
              ZOK);
    ASSERT_OK(first->Release());
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<Hold> second = (*lock)->Acquire({.wait = absl::Seconds(20)});
  ASSERT_OK(second);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_OK(second->Release());
}

// A lock, a semaphore and an election of one name are three objects: three
// parents, each listed as its kind only, and nothing left once released.
TEST(ZooKeeperNodes, KindsOfObjectLiveApartAndListApart) {
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect(Server().Uri("kinds"));
  ASSERT_OK(client);
  auto lock = (*client)->GetLock("jobs");
  auto sem = (*client)->GetSemaphore("jobs", 2);
  auto election = (*client)->GetElection("jobs");
  auto rw = (*client)->GetReadWriteLock("read");
  ASSERT_OK(lock);
  ASSERT_OK(sem);
  ASSERT_OK(election);
  ASSERT_OK(rw);
  absl::StatusOr<Hold> written = (*lock)->TryAcquire();
  absl::StatusOr<Permit> permit = (*sem)->TryAcquire(1);
  absl::StatusOr<Leadership> leading = (*election)->Campaign("here");
  absl::StatusOr<Hold> read = (*rw)->TryAcquireRead();
  ASSERT_OK(written);
  ASSERT_OK(permit);
  ASSERT_OK(leading);
  ASSERT_OK(read);
  RawHandle raw;
  EXPECT_EQ(raw.CountChildren("/dlock/kinds/jobs"), 1);
  EXPECT_EQ(raw.CountChildren("/dlock/kinds/%1Fsjobs"), 1);
  EXPECT_EQ(raw.CountChildren("/dlock/kinds/%1Fejobs"), 1);
  LockAdmin& admin = (*client)->Admin();
  absl::StatusOr<std::vector<LockInfo>> locks = admin.List();
  ASSERT_OK(locks);
  // "read" has readers alone, no writer: ListObjects shows it (C23).
  ASSERT_EQ(locks->size(), 1u) << "another kind was listed as a lock";
  EXPECT_EQ((*locks)[0].name, "jobs");
  absl::StatusOr<std::vector<ObjectInfo>> readers =
      admin.ListObjects(ObjectKind::kLock, "read");
  ASSERT_OK(readers);
  ASSERT_EQ(readers->size(), 1u);
  ASSERT_EQ((*readers)[0].holders.size(), 1u);
  EXPECT_TRUE((*readers)[0].holders[0].shared);
  for (ObjectKind kind : {ObjectKind::kSemaphore, ObjectKind::kElection}) {
    absl::StatusOr<std::vector<ObjectInfo>> listed = admin.ListObjects(kind);
    ASSERT_OK(listed);
    ASSERT_EQ(listed->size(), 1u) << ObjectKindName(kind);
    EXPECT_EQ((*listed)[0].name, "jobs");
    EXPECT_EQ((*listed)[0].limit, kind == ObjectKind::kSemaphore ? 2 : 1);
  }
  EXPECT_OK(written->Release());
  EXPECT_OK(permit->Release());
  EXPECT_OK(leading->Resign());
  // A lock held by readers alone: forcing it removes every reader.
  absl::StatusOr<std::unique_ptr<LockClient>> other =
      Connect(Server().Uri("kinds"));
  ASSERT_OK(other);
  auto other_rw = (*other)->GetReadWriteLock("read");
  ASSERT_OK(other_rw);
  absl::StatusOr<Hold> second = (*other_rw)->TryAcquireRead();
  ASSERT_OK(second);
  ASSERT_OK(admin.ForceUnlockObject(ObjectKind::kLock, "read"));
  EXPECT_FALSE(read->Release().ok()) << "a reader outlived a force unlock";
  EXPECT_FALSE(second->Release().ok()) << "a reader outlived a force unlock";
  for (const char* parent : {"jobs", "%1Fsjobs", "%1Fejobs", "read"}) {
    EXPECT_LE(raw.CountChildren(absl::StrCat("/dlock/kinds/", parent)), 0)
        << parent;
  }
}

TEST(ZooKeeperNodes, DigestAclKeepsOthersOut) {
  const std::string uri = Server().Uri("acl");
  absl::StatusOr<std::unique_ptr<LockClient>> alice =
      Connect(uri + "&auth=digest:alice:s3cret-pw");
  ASSERT_OK(alice);
  EXPECT_FALSE(absl::StrContains((*alice)->endpoint(), "s3cret-pw"));
  auto held = (*alice)->GetLock("guarded/one");
  ASSERT_OK(held);
  AcquireOptions long_lease;
  long_lease.lease = absl::Seconds(60);
  absl::StatusOr<Hold> acquired = (*held)->Acquire(long_lease);
  ASSERT_OK(acquired);

  // Without the credential, or with another one: no lock, no force unlock,
  // and messages that never show the password.
  for (const std::string& suffix :
       {std::string(), std::string("&auth=digest:alice:wrong"),
        std::string("&auth=digest:mallory:s3cret-pw")}) {
    absl::StatusOr<std::unique_ptr<LockClient>> other = Connect(uri + suffix);
    ASSERT_OK(other);
    auto lock = (*other)->GetLock("guarded/one");
    ASSERT_OK(lock);
    absl::StatusOr<Hold> tried = (*lock)->TryAcquire();
    EXPECT_TRUE(absl::IsPermissionDenied(tried.status())) << tried.status();
    EXPECT_FALSE(absl::StrContains(tried.status().message(), "s3cret-pw"));
    EXPECT_FALSE(absl::StrContains(tried.status().message(), "wrong"));
    const absl::Status forced = (*other)->Admin().ForceUnlock((*lock)->name());
    EXPECT_TRUE(absl::IsPermissionDenied(forced)) << forced;
    auto fresh = (*other)->GetLock("guarded/another name");
    ASSERT_OK(fresh);
    EXPECT_TRUE(absl::IsPermissionDenied((*fresh)->TryAcquire().status()));
    // Reading stays open: anyone may see who holds it.
    absl::StatusOr<LockInfo> info = (*other)->Admin().Inspect((*lock)->name());
    ASSERT_OK(info);
    EXPECT_TRUE(info->locked);
    EXPECT_EQ(info->owner, (*alice)->CurrentOwner());
  }

  // A plain C client without the credential cannot delete or rewrite the
  // lock node.
  {
    RawHandle raw;
    const std::string parent = "/dlock/acl/guarded%2Fone";
    std::vector<std::string> nodes = raw.Children(parent);
    ASSERT_EQ(nodes.size(), 1u);
    const std::string node = parent + "/" + nodes[0];
    EXPECT_EQ(zoo_delete(raw.get(), node.c_str(), -1), ZNOAUTH);
    EXPECT_EQ(zoo_set(raw.get(), node.c_str(), "x", 1, -1), ZNOAUTH);
    EXPECT_EQ(zoo_delete(raw.get(), parent.c_str(), -1), ZNOAUTH);
    EXPECT_EQ(zoo_create(raw.get(), (parent + "/intruder").c_str(), "", 0,
                         &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0),
              ZNOAUTH);
  }
  absl::StatusOr<LockInfo> still = (*alice)->Admin().Inspect((*held)->name());
  ASSERT_OK(still);
  EXPECT_TRUE(still->locked);
  EXPECT_EQ(still->fencing_token, acquired->fencing_token());

  // The same credential in another client is simply another contender.
  absl::StatusOr<std::unique_ptr<LockClient>> colleague =
      Connect(uri + "&auth=digest:alice:s3cret-pw");
  ASSERT_OK(colleague);
  auto contended = (*colleague)->GetLock("guarded/one");
  ASSERT_OK(contended);
  EXPECT_TRUE(absl::IsDeadlineExceeded((*contended)->TryAcquire().status()));
  ASSERT_OK(acquired->Release());
  absl::StatusOr<Hold> next = (*contended)->TryAcquire();
  ASSERT_OK(next);
  EXPECT_GT(next->fencing_token(), acquired->fencing_token());
  EXPECT_OK(next->Release());
}

}  // namespace
}  // namespace dlock::test
