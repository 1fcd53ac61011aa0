// Copyright dlock authors. The zk:// backend keeps what it knows of a hold in
// that hold's record (HoldRecord, dlock/backend/backend.h), not in a table
// keyed by lock name and owner: a call about one hold acts on that hold's
// node and on no other, even a later hold of the same owner on the same
// lock. The tests call the backend as the core does, through the Backend
// interface, including with records of holds the core would have given up.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dlock/backend/backend.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "status_testing.h"
#include "zookeeper_fault_helpers.h"
#include "zookeeper_server.h"

namespace dlock::test {
namespace {

constexpr char kNamespace[] = "records";
// Owners as the backend sees them: owner ids the core would make for two
// threads of one client.
constexpr char kOwnerA[] = "c:records-test:a";
constexpr char kOwnerB[] = "c:records-test:b";
constexpr absl::Duration kLongLease = absl::Seconds(60);

class RecordsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(server_, ZooKeeperServer::Start());
    ClientOptions options;
    // The client owns the backend; the test calls it directly, as the core
    // would, with holds the core knows nothing of.
    options.backend_decorator = [this](std::unique_ptr<Backend> backend) {
      backend_ = backend.get();
      return backend;
    };
    ASSERT_OK_AND_ASSIGN(client_, Connect(server_->Uri(kNamespace), options));
    ASSERT_NE(backend_, nullptr);
    raw_ = std::make_unique<RawZooKeeper>(server_->Hosts());
  }

  absl::StatusOr<Grant> Acquire(const std::string& name,
                                const std::string& owner, absl::Duration lease,
                                absl::Duration wait = absl::ZeroDuration(),
                                HoldRecord* held = nullptr) {
    return backend_->Acquire(AcquireCall{.name = name,
                                         .owner = owner,
                                         .lease = lease,
                                         .deadline = Clock::Real().Now() + wait,
                                         .held = held});
  }
  absl::StatusOr<int64_t> Release(const std::string& name,
                                  const std::string& owner,
                                  HoldRecord* record) {
    return backend_->Release(
        ReleaseCall{.name = name, .owner = owner, .record = record});
  }
  // As the core releases a thread owner's hold it gives up.
  absl::StatusOr<int64_t> ReleaseAll(const std::string& name,
                                     const std::string& owner,
                                     HoldRecord* record) {
    return backend_->Release(ReleaseCall{
        .name = name, .owner = owner, .all_holds = true, .record = record});
  }
  absl::Status Renew(const std::string& name, const std::string& owner,
                     HoldRecord* record) {
    return backend_->Renew(RenewCall{
        .name = name, .owner = owner, .lease = kLongLease, .record = record});
  }
  bool Believed(const std::string& name, const std::string& owner,
                const HoldRecord* record) {
    return backend_->HeldUntil(name, owner, record) > Clock::Real().Now();
  }
  size_t Nodes(const std::string& name) {
    return raw_->Children(LockParent(kNamespace, name)).size();
  }

  std::unique_ptr<ZooKeeperServer> server_;
  std::unique_ptr<LockClient> client_;
  Backend* backend_ = nullptr;
  std::unique_ptr<RawZooKeeper> raw_;
};

// With the holds of a (lock, owner) pair in a table, a call with the
// earlier hold's record found the later hold there and released it.
TEST_F(RecordsTest, AnEarlierHoldsRecordNeverTouchesALaterHoldOfItsOwner) {
  const std::string name = "earlier-and-later";
  ASSERT_OK_AND_ASSIGN(Grant first, Acquire(name, kOwnerA, kLongLease));
  ASSERT_NE(first.record, nullptr);
  // Gone behind the backend's back; the same owner takes the lock afresh.
  ASSERT_OK(backend_->ForceUnlock(name));
  ASSERT_OK_AND_ASSIGN(Grant later, Acquire(name, kOwnerA, kLongLease));
  ASSERT_NE(later.record, nullptr);
  EXPECT_NE(later.record, first.record);
  EXPECT_GT(later.fencing_token, first.fencing_token);

  // Each call about the first hold fails as not held, the first time (the
  // record still believed its node) and every time after.
  EXPECT_CODE(ReleaseAll(name, kOwnerA, first.record.get()),
              kFailedPrecondition);
  EXPECT_FALSE(Believed(name, kOwnerA, first.record.get()));
  EXPECT_CODE(ReleaseAll(name, kOwnerA, first.record.get()),
              kFailedPrecondition);
  EXPECT_CODE(Renew(name, kOwnerA, first.record.get()), kFailedPrecondition);

  // The later hold is exactly as it was.
  EXPECT_TRUE(Believed(name, kOwnerA, later.record.get()));
  ASSERT_OK_AND_ASSIGN(LockInfo info, backend_->Inspect(name));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.owner, kOwnerA);
  EXPECT_EQ(info.fencing_token, later.fencing_token);
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_OK(Renew(name, kOwnerA, later.record.get()));
  ASSERT_OK_AND_ASSIGN(int64_t left,
                       Release(name, kOwnerA, later.record.get()));
  EXPECT_EQ(left, 0);
  ASSERT_OK_AND_ASSIGN(info, backend_->Inspect(name));
  EXPECT_FALSE(info.locked);
}

TEST_F(RecordsTest, TwoOwnersOfOneLockInOneClientKeepSeparateRecords) {
  const std::string name = "two-owners";
  ASSERT_OK_AND_ASSIGN(Grant a,
                       Acquire(name, kOwnerA, absl::Milliseconds(300)));
  // B waits until A's lease runs out, then removes A's node.
  ASSERT_OK_AND_ASSIGN(Grant b,
                       Acquire(name, kOwnerB, kLongLease, absl::Seconds(10)));
  ASSERT_NE(a.record, nullptr);
  ASSERT_NE(b.record, nullptr);
  EXPECT_GT(b.fencing_token, a.fencing_token);
  EXPECT_EQ(Nodes(name), 1u);

  EXPECT_CODE(ReleaseAll(name, kOwnerA, a.record.get()), kFailedPrecondition);
  EXPECT_CODE(Renew(name, kOwnerA, a.record.get()), kFailedPrecondition);
  EXPECT_FALSE(Believed(name, kOwnerA, a.record.get()));
  EXPECT_TRUE(Believed(name, kOwnerB, b.record.get()));

  // B re-enters through its record, which is written in place and stays
  // the hold's.
  ASSERT_OK_AND_ASSIGN(
      Grant again,
      Acquire(name, kOwnerB, kLongLease, absl::ZeroDuration(), b.record.get()));
  EXPECT_EQ(again.record, b.record);
  EXPECT_EQ(again.fencing_token, b.fencing_token);
  EXPECT_EQ(again.hold_count, 2);
  ASSERT_OK_AND_ASSIGN(int64_t left, Release(name, kOwnerB, b.record.get()));
  EXPECT_EQ(left, 1);
  ASSERT_OK_AND_ASSIGN(LockInfo info, backend_->Inspect(name));
  EXPECT_EQ(info.owner, kOwnerB);
  EXPECT_EQ(info.hold_count, 1);
  ASSERT_OK_AND_ASSIGN(left, Release(name, kOwnerB, b.record.get()));
  EXPECT_EQ(left, 0);
  EXPECT_EQ(Nodes(name), 0u);
}

// A grant whose reply never reached the core (its record dropped with it):
// the owner's next acquisition re-enters that hold instead of waiting out
// its lease, and one release of everything frees the lock (C21).
TEST_F(RecordsTest, AGrantTheCoreNeverSawIsReenteredByItsOwner) {
  const std::string name = "grant-lost";
  uint64_t token = 0;
  {
    ASSERT_OK_AND_ASSIGN(Grant lost, Acquire(name, kOwnerA, kLongLease));
    token = lost.fencing_token;
  }
  ASSERT_OK_AND_ASSIGN(Grant retried, Acquire(name, kOwnerA, kLongLease));
  ASSERT_NE(retried.record, nullptr);
  EXPECT_EQ(retried.fencing_token, token);
  EXPECT_EQ(retried.hold_count, 2);
  EXPECT_EQ(Nodes(name), 1u) << "the retry's own node was left behind";
  EXPECT_TRUE(Believed(name, kOwnerA, retried.record.get()));
  ASSERT_OK_AND_ASSIGN(int64_t left,
                       ReleaseAll(name, kOwnerA, retried.record.get()));
  EXPECT_EQ(left, 0);
  EXPECT_EQ(Nodes(name), 0u);

  // Another owner's hold is never re-entered: it is waited for.
  ASSERT_OK_AND_ASSIGN(Grant b, Acquire(name, kOwnerB, kLongLease));
  EXPECT_CODE(Acquire(name, kOwnerA, kLongLease), kDeadlineExceeded);
  ASSERT_OK_AND_ASSIGN(left, Release(name, kOwnerB, b.record.get()));
  EXPECT_EQ(left, 0);
}

// A record is written by the renewer's thread and a caller's at once (as
// often as a watchdog with a lease of 30 ms would renew); each release takes
// exactly one hold off, whatever the renewals did meanwhile.
TEST_F(RecordsTest, RenewalsAndReleasesOfOneRecordRace) {
  const std::string name = "raced";
  constexpr int kHolds = 20;
  ASSERT_OK_AND_ASSIGN(Grant first, Acquire(name, kOwnerA, kLongLease));
  HoldRecord* record = first.record.get();
  for (int i = 1; i < kHolds; ++i) {
    ASSERT_OK_AND_ASSIGN(Grant again, Acquire(name, kOwnerA, kLongLease,
                                              absl::ZeroDuration(), record));
    ASSERT_EQ(again.hold_count, i + 1);
  }
  std::atomic<bool> stop{false};
  std::atomic<int> renewed{0};
  std::thread renewer([&] {
    while (!stop.load()) {
      // The watchdog's batch, then a renewal asked by the caller.
      std::vector<absl::Status> results =
          backend_->RenewMany({RenewCall{.name = name,
                                         .owner = kOwnerA,
                                         .lease = kLongLease,
                                         .record = record}});
      if (results.size() == 1 && results[0].ok()) ++renewed;
      absl::SleepFor(absl::Milliseconds(10));
      if (Renew(name, kOwnerA, record).ok()) ++renewed;
      absl::SleepFor(absl::Milliseconds(10));
    }
  });
  absl::Cleanup join = [&] {
    stop = true;
    renewer.join();
  };
  for (int left = kHolds - 1; left >= 0; --left) {
    absl::StatusOr<int64_t> released = Release(name, kOwnerA, record);
    ASSERT_OK(released);
    EXPECT_EQ(*released, left);
    absl::SleepFor(absl::Milliseconds(7));
  }
  std::move(join).Invoke();
  EXPECT_GT(renewed.load(), 0);
  EXPECT_EQ(Nodes(name), 0u);
  EXPECT_FALSE(Believed(name, kOwnerA, record));
  EXPECT_CODE(Renew(name, kOwnerA, record), kFailedPrecondition);
}

// The same race with no pauses, from several threads: the writes a client
// makes to its own node take turns, so however often the watchdog and the
// caller renew, a release never gives up on conflicts with them ("kept
// conflicting"), nor a re-entry.
TEST_F(RecordsTest, OwnWritesToOneRecordNeverConflict) {
  const std::string name = "hammered";
  constexpr int kHolds = 30;
  ASSERT_OK_AND_ASSIGN(Grant first, Acquire(name, kOwnerA, kLongLease));
  HoldRecord* record = first.record.get();
  std::atomic<bool> stop{false};
  std::vector<std::thread> renewers;
  for (int t = 0; t < 3; ++t) {
    renewers.emplace_back([&, t] {
      while (!stop.load()) {
        if (t == 0) {
          backend_->RenewMany({RenewCall{.name = name,
                                         .owner = kOwnerA,
                                         .lease = kLongLease,
                                         .record = record}});
        } else {
          (void)Renew(name, kOwnerA, record);
        }
      }
    });
  }
  absl::Cleanup join = [&] {
    stop = true;
    for (std::thread& r : renewers) r.join();
  };
  for (int i = 1; i < kHolds; ++i) {
    ASSERT_OK_AND_ASSIGN(Grant again, Acquire(name, kOwnerA, kLongLease,
                                              absl::ZeroDuration(), record));
    ASSERT_EQ(again.hold_count, i + 1);
  }
  for (int left = kHolds - 1; left >= 0; --left) {
    absl::StatusOr<int64_t> released = Release(name, kOwnerA, record);
    ASSERT_OK(released);
    EXPECT_EQ(*released, left);
  }
  std::move(join).Invoke();
  EXPECT_EQ(Nodes(name), 0u);
  EXPECT_FALSE(Believed(name, kOwnerA, record));
}

}  // namespace
}  // namespace dlock::test
