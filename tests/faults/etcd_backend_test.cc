// Copyright dlock authors. The etcd:// backend against the failure classes
// of etcd clients (issue 25), on a real cluster of three members started by
// the test, with the fault proxy in front of the first member:
//   - a release retried after its reply was lost must not delete a newer
//     hold of the same owner (etcd #22082);
//   - an acquisition whose reply was lost is retried on another member and
//     applied once, and reported as granted when it committed (Jepsen's
//     jetcd analysis, 2024);
//   - a waiter whose watch missed the release wakes at its fallback re-check.
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dlock/backend/forwarding_backend.h"
#include "dlock/dlock.h"
#include "etcd_server.h"
#include "fault_proxy.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

class EtcdBackendFaultTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<EtcdServer>> server =
        EtcdServer::Start({.members = 3});
    ASSERT_OK(server);
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "etcd did not start";
    ns_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  // Every member, directly.
  std::string Uri() const { return server_->Uri(ns_); }
  // The first member through `proxy` (tried first), the others directly;
  // each attempt gets 500ms, so a lost reply moves the call on quickly.
  std::string UriThrough(const FaultProxy& proxy) const {
    const std::vector<std::string> members = server_->Endpoints();
    return absl::StrCat("etcd://127.0.0.1:", proxy.port(), ",", members[1], ",",
                        members[2], "?namespace=", ns_,
                        "&operation_timeout=500ms");
  }

  static inline EtcdServer* server_ = nullptr;
  std::string ns_;
};

// Keeps every record the backend granted, so that a test can send a call
// about a hold again after the core forgot it, as a late retry would.
class RecordKeeper : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override {
    absl::StatusOr<Grant> grant = ForwardingBackend::Acquire(call);
    if (grant.ok() && grant->record != nullptr) {
      absl::MutexLock lock(&mu_);
      records_.push_back(grant->record);
    }
    return grant;
  }
  std::shared_ptr<HoldRecord> record(size_t i) {
    absl::MutexLock lock(&mu_);
    return i < records_.size() ? records_[i] : nullptr;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::shared_ptr<HoldRecord>> records_ ABSL_GUARDED_BY(mu_);
};

TEST_F(EtcdBackendFaultTest, ARetriedReleaseSparesTheOwnersNewerHold) {
  RecordKeeper* keeper = nullptr;
  ClientOptions options;
  options.backend_decorator = [&](std::unique_ptr<Backend> backend) {
    auto decorated = std::make_unique<RecordKeeper>(std::move(backend));
    keeper = decorated.get();
    return decorated;
  };
  ASSERT_OK_AND_ASSIGN(auto client, Connect(Uri(), options));
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("job"));
  const AcquireOptions as_job{.lease = absl::Seconds(30),
                              .owner_token = "job-1"};

  ASSERT_OK_AND_ASSIGN(Hold first, lock->Acquire(as_job));
  const std::shared_ptr<HoldRecord> first_record = keeper->record(0);
  ASSERT_NE(first_record, nullptr);
  ASSERT_OK_AND_ASSIGN(const LockInfo held, client->Admin().Inspect("job"));
  const std::string owner = held.owner;  // the token's owner id
  // The release runs; say its reply was lost, and the owner took the lock
  // again meanwhile.
  ASSERT_OK(first.Release());
  ASSERT_OK_AND_ASSIGN(Hold second, lock->Acquire(as_job));
  ASSERT_GT(second.fencing_token(), first.fencing_token());

  // The first release, sent again: it must not touch the newer hold.
  const absl::StatusOr<int64_t> retried =
      keeper->target().Release(ReleaseCall{.name = "job",
                                           .owner = owner,
                                           .all_holds = true,
                                           .record = first_record.get()});
  EXPECT_CODE(retried, kFailedPrecondition);
  EXPECT_TRUE(IsNotOwner(retried.status())) << retried.status();
  ASSERT_OK_AND_ASSIGN(LockInfo info, client->Admin().Inspect("job"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.owner, owner);
  EXPECT_EQ(info.fencing_token, second.fencing_token());
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_OK(second.Release());
}

// A waiter on its own thread: Acquire(), then Release() of what it got.
struct Waiter {
  absl::StatusOr<Hold> hold = absl::UnknownError("not done");
  absl::Time done;
  std::thread thread;
};
void StartWaiter(DistributedLock& lock, Waiter& waiter,
                 const std::string& owner_token = "") {
  waiter.thread = std::thread([&lock, &waiter, owner_token] {
    waiter.hold = lock.Acquire({.wait = absl::Seconds(20),
                                .lease = absl::Seconds(60),
                                .owner_token = owner_token});
    waiter.done = absl::Now();
  });
}

TEST_F(EtcdBackendFaultTest, AnAcquireWhoseReplyWasLostIsGrantedOnce) {
  FaultProxy proxy;
  ASSERT_OK(proxy.Start("127.0.0.1", server_->client_port(0)));
  ASSERT_OK_AND_ASSIGN(auto holder_client, Connect(Uri()));
  ASSERT_OK_AND_ASSIGN(auto waiter_client, Connect(UriThrough(proxy)));
  ASSERT_OK_AND_ASSIGN(auto held, holder_client->GetLock("contended"));
  ASSERT_OK_AND_ASSIGN(auto wanted, waiter_client->GetLock("contended"));
  ASSERT_OK_AND_ASSIGN(Hold holder,
                       held->Acquire({.lease = absl::Seconds(60)}));

  // The waiter tried once (through the proxy) and waits; from now on every
  // reply of the first member is lost, its wake-up included: it looks again
  // at its fallback poll, and the create's reply is lost too.
  // As an owner token: a retry that took the key its first attempt made
  // for another holder's would re-enter it (two holds).
  Waiter waiter;
  StartWaiter(*wanted, waiter, "waiter");
  absl::SleepFor(absl::Milliseconds(500));
  proxy.SetFault(Direction::kReplies, Fault::Drop());
  const uint64_t dropped = proxy.stats().replies.dropped;
  ASSERT_OK(holder.Release());
  waiter.thread.join();

  ASSERT_OK(waiter.hold);
  EXPECT_GT(proxy.stats().replies.dropped, dropped) << "no reply was lost";
  EXPECT_EQ(waiter.hold->hold_count(), 1) << "the create was applied twice";
  ASSERT_OK_AND_ASSIGN(LockInfo info,
                       holder_client->Admin().Inspect("contended"));
  EXPECT_EQ(info.owner, "t:waiter");
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_EQ(info.fencing_token, waiter.hold->fencing_token());
  EXPECT_OK(waiter.hold->Release());
}

TEST_F(EtcdBackendFaultTest, AWaiterWhoseWatchMissedTheReleaseWakesAtItsPoll) {
  constexpr absl::Duration kPoll = absl::Seconds(2);
  FaultProxy proxy;
  ASSERT_OK(proxy.Start("127.0.0.1", server_->client_port(0)));
  ASSERT_OK_AND_ASSIGN(auto holder_client, Connect(Uri()));
  ClientOptions options;
  options.fallback_poll = kPoll;
  ASSERT_OK_AND_ASSIGN(auto waiter_client, Connect(UriThrough(proxy), options));
  ASSERT_OK_AND_ASSIGN(auto held, holder_client->GetLock("missed"));
  ASSERT_OK_AND_ASSIGN(auto wanted, waiter_client->GetLock("missed"));
  ASSERT_OK_AND_ASSIGN(Hold holder,
                       held->Acquire({.lease = absl::Seconds(60)}));

  Waiter waiter;
  StartWaiter(*wanted, waiter);
  absl::SleepFor(absl::Milliseconds(500));
  // The waiter's watch is on the first member: its event is held there
  // for good (a silent partition of that member alone).
  proxy.SetFault(Direction::kReplies, Fault::Stall());
  const absl::Time released = absl::Now();
  ASSERT_OK(holder.Release());
  waiter.thread.join();

  ASSERT_OK(waiter.hold);
  // The fallback poll, the lost attempt on the first member (500ms) and a
  // few round trips; not the 20s wait.
  EXPECT_LE(waiter.done - released, kPoll + absl::Seconds(2));
  EXPECT_OK(waiter.hold->Release());
  proxy.SetFault(Direction::kReplies, Fault::Pass(), Held::kDiscard);
}

// The leader killed under a renewed hold: the cluster elects another, the
// holder's renewals go on through it and its hold is never lost; a waiter
// does not get the lock meanwhile, and gets it after the release with a
// larger token. etcd gives every lease its whole TTL again when a new leader
// takes over (etcd #20273): the holder sees nothing of it (its deadline is
// its own), a waiter only waits longer for a holder that would have died.
// Last: it leaves a member restarted.
TEST_F(EtcdBackendFaultTest, ALeaderKilledUnderAHoldKeepsItAndTokensGrow) {
  ClientOptions renewed;
  renewed.watchdog_lease = absl::Seconds(2);
  ASSERT_OK_AND_ASSIGN(auto holder_client, Connect(Uri(), renewed));
  ASSERT_OK_AND_ASSIGN(auto waiter_client, Connect(Uri()));
  ASSERT_OK_AND_ASSIGN(auto held, holder_client->GetLock("through"));
  ASSERT_OK_AND_ASSIGN(auto wanted, waiter_client->GetLock("through"));
  LockLostCallback unexpected = [](const LockLostEvent& event) {
    ADD_FAILURE() << "hold lost: " << event.reason;
  };
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire({.on_lost = unexpected}));

  ASSERT_OK_AND_ASSIGN(const int leader, server_->Leader());
  server_->KillMember(leader);
  ASSERT_OK(server_->WaitForLeader(absl::Seconds(10)));
  ASSERT_OK_AND_ASSIGN(const int new_leader, server_->Leader());
  EXPECT_NE(new_leader, leader);
  // Several renewals of the 2 s watchdog lease through the new leader.
  absl::SleepFor(absl::Seconds(3));
  EXPECT_EQ(hold.state(), LockState::kHeld);
  EXPECT_EQ(wanted->TryAcquire().status().code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_OK_AND_ASSIGN(LockInfo info,
                       waiter_client->Admin().Inspect("through"));
  EXPECT_EQ(info.fencing_token, hold.fencing_token());

  const uint64_t token = hold.fencing_token();
  ASSERT_OK(hold.Release());
  ASSERT_OK_AND_ASSIGN(Hold next, wanted->TryAcquire());
  EXPECT_GT(next.fencing_token(), token);
  EXPECT_OK(next.Release());
  EXPECT_OK(server_->StartMember(leader));
}

}  // namespace
}  // namespace dlock::test
