// Copyright dlock authors. The etcd:// backend against the failure classes
// of etcd clients (issue 25), on a real cluster of three members started by
// the test, with the fault proxy in front of the first member:
//   - a release retried after its reply was lost must not delete a newer
//     hold of the same owner (etcd #22082), also one on the same lease;
//   - an acquisition whose reply was lost is retried on another member and
//     applied once, and reported as granted when it committed (Jepsen's
//     jetcd analysis, 2024);
//   - a waiter whose watch missed the release wakes at its fallback re-check;
//     the watch starts with a client's first wait;
//   - holder liveness: a client's lapsed liveness key is never named again,
//     a waiter whose watch missed its deletion takes the hold over at its
//     fallback re-check, and a closed client leaves no key behind;
//   - the primitives' keys (issue 24) are no locks to the lock admin, and a
//     reader is granted by one Txn, as a writer is.
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "dlock/backend/forwarding_backend.h"
#include "dlock/dlock.h"
#include "etcd_server.h"
#include "etcd_server_suite.h"
#include "fault_backend.h"
#include "fault_proxy.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

class EtcdBackendFaultTest : public EtcdServerSuite<EtcdBackendFaultTest> {
 public:
  static EtcdServer::Options ServerOptions() { return {.members = 3}; }

 protected:
  // The first member through `proxy` (tried first), the others directly;
  // each attempt gets 500ms, so a lost reply moves the call on quickly.
  std::string UriThrough(const FaultProxy& proxy) const {
    const std::vector<std::string> members = server_->Endpoints();
    return absl::StrCat("etcd://127.0.0.1:", proxy.port(), ",", members[1], ",",
                        members[2], "?namespace=", ns_,
                        "&operation_timeout=500ms");
  }

  // How many clients' liveness keys exist now.
  static int LivenessKeys() {
    absl::StatusOr<std::string> keys =
        server_->Etcdctl({"get", "--prefix", "/dlock/%live/", "--keys-only"});
    if (!keys.ok()) {
      ADD_FAILURE() << keys.status();
      return -1;
    }
    const std::vector<absl::string_view> lines =
        absl::StrSplit(*keys, '\n', absl::SkipEmpty());
    return static_cast<int>(lines.size());
  }
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

// Options whose backend is wrapped in a RecordKeeper, set in `keeper`.
ClientOptions KeepingRecords(RecordKeeper*& keeper) {
  ClientOptions options;
  options.backend_decorator = [&keeper](std::unique_ptr<Backend> backend) {
    auto decorated = std::make_unique<RecordKeeper>(std::move(backend));
    keeper = decorated.get();
    return decorated;
  };
  return options;
}

TEST_F(EtcdBackendFaultTest, ARetriedReleaseSparesTheOwnersNewerHold) {
  RecordKeeper* keeper = nullptr;
  ASSERT_OK_AND_ASSIGN(auto client, Connect(Uri(), KeepingRecords(keeper)));
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

// A thread's hold untouched since its create gives its lease back to the
// client's spares at its release, and the owner's next hold (of the same
// lock, or another) may go on it: the first release sent again, as a late
// retry would, must delete neither (etcd #22082 with the lease reused).
TEST_F(EtcdBackendFaultTest, ARetriedReleaseSparesANewerHoldOnItsLease) {
  RecordKeeper* keeper = nullptr;
  ASSERT_OK_AND_ASSIGN(auto client, Connect(Uri(), KeepingRecords(keeper)));
  const AcquireOptions thirty{.lease = absl::Seconds(30)};
  // The lease the key of `name` lives on, as etcdctl tells it.
  auto key_lease = [&](const std::string& name) -> std::string {
    absl::StatusOr<std::string> json = server_->Etcdctl(
        {"get", absl::StrCat("/dlock/", ns_, "/", name), "-w", "json"});
    if (!json.ok()) return json.status().ToString();
    const size_t at = json->find("\"lease\":");
    return at == std::string::npos ? "none" : json->substr(at, 30);
  };
  size_t records = 0;
  for (const std::string next : {"job", "other"}) {
    ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("job"));
    ASSERT_OK_AND_ASSIGN(auto next_lock, client->GetLock(next));
    // Acquired back to back, the length is in demand and its spares ready;
    // the next hold takes the freshest, not always the one given back.
    bool reused = false;
    for (int round = 0; round < 20 && !reused; ++round) {
      ASSERT_OK_AND_ASSIGN(Hold first, lock->Acquire(thirty));
      const std::shared_ptr<HoldRecord> first_record =
          keeper->record(records++);
      ASSERT_NE(first_record, nullptr);
      ASSERT_OK_AND_ASSIGN(const LockInfo held, client->Admin().Inspect("job"));
      const std::string first_lease = key_lease("job");
      ASSERT_OK(first.Release());
      ASSERT_OK_AND_ASSIGN(Hold second, next_lock->Acquire(thirty));
      ++records;
      reused = key_lease(next) == first_lease;
      if (reused) {
        const absl::StatusOr<int64_t> retried =
            keeper->target().Release(ReleaseCall{.name = "job",
                                                 .owner = held.owner,
                                                 .all_holds = true,
                                                 .record = first_record.get()});
        EXPECT_TRUE(IsNotOwner(retried.status())) << retried.status();
        ASSERT_OK_AND_ASSIGN(LockInfo info, client->Admin().Inspect(next));
        EXPECT_TRUE(info.locked) << next;
        EXPECT_EQ(info.fencing_token, second.fencing_token()) << next;
      }
      EXPECT_OK(second.Release());
    }
    EXPECT_TRUE(reused) << "no hold of " << next
                        << " went on the lease given back";
  }
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

// The namespace's watch starts with a client's first wait: acquisitions
// that wait for nothing open none (etcd would send such a client both
// writes of every pair), and the first waiter, whose watch began after its
// first look, is still woken by the release, not by its fallback poll.
TEST_F(EtcdBackendFaultTest, TheNamespacesWatchStartsWithTheFirstWait) {
  constexpr absl::Duration kPoll = absl::Seconds(15);
  ClientOptions options;
  options.fallback_poll = kPoll;
  ASSERT_OK_AND_ASSIGN(const int64_t watches, server_->CallsStarted("Watch"));
  ASSERT_OK_AND_ASSIGN(auto holder_client, Connect(Uri(), options));
  ASSERT_OK_AND_ASSIGN(auto held, holder_client->GetLock("first-wait"));
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire());
    ASSERT_OK(hold.Release());
  }
  ASSERT_OK_AND_ASSIGN(Hold holder,
                       held->Acquire({.lease = absl::Seconds(60)}));
  ASSERT_OK_AND_ASSIGN(const int64_t watches_then,
                       server_->CallsStarted("Watch"));
  EXPECT_EQ(watches_then - watches, 0)
      << "watches opened by a client that never waited";

  ASSERT_OK_AND_ASSIGN(auto waiter_client, Connect(Uri(), options));
  ASSERT_OK_AND_ASSIGN(auto wanted, waiter_client->GetLock("first-wait"));
  Waiter waiter;
  StartWaiter(*wanted, waiter);
  absl::SleepFor(absl::Milliseconds(500));
  const absl::Time released = absl::Now();
  ASSERT_OK(holder.Release());
  waiter.thread.join();
  ASSERT_OK(waiter.hold);
  // The watch's event, not the poll (15s; the wait is 20s).
  EXPECT_LT(waiter.done - released, kPoll / 3);
  EXPECT_OK(waiter.hold->Release());
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

// Holder liveness (etcd_liveness.h). A client whose liveness key lapsed
// (its heartbeats stopped reaching etcd) begins another for its next hold:
// the old one is never named again, so its holds stay free to take over
// while its new ones are protected. Inspect and List say which is which.
TEST_F(EtcdBackendFaultTest, ALapsedLivenessKeyIsNeverNamedAgain) {
  constexpr absl::Duration kTtl = absl::Seconds(1);
  auto faults = std::make_shared<FaultPlan>();
  ClientOptions options;
  options.liveness_ttl = kTtl;
  options.backend_decorator = faults->Decorator();
  ASSERT_OK_AND_ASSIGN(auto client, Connect(Uri(), options));
  ASSERT_OK_AND_ASSIGN(auto other, Connect(Uri()));
  ASSERT_OK_AND_ASSIGN(auto old_lock, client->GetLock("old"));
  ASSERT_OK_AND_ASSIGN(Hold old_hold,
                       old_lock->Acquire({.lease = absl::Minutes(10)}));

  // Its heartbeats stop reaching etcd, and so does the release the core
  // sends of a hold it tells lost: the hold stays, its client's key goes.
  faults->Set(FaultPlan::kLiveness, {.fail_before = true});
  faults->Set(FaultPlan::kRelease, {.fail_before = true});
  ASSERT_OK(test::WaitUntil(
      [&] {
        absl::StatusOr<LockInfo> info = other->Admin().Inspect("old");
        return info.ok() && info->holder_live == std::optional<bool>(false);
      },
      absl::Seconds(10), "the liveness key to lapse"));
  EXPECT_EQ(old_hold.state(), LockState::kLost);
  faults->Clear(FaultPlan::kLiveness);

  ASSERT_OK_AND_ASSIGN(auto new_lock, client->GetLock("new"));
  ASSERT_OK_AND_ASSIGN(Hold new_hold,
                       new_lock->Acquire({.lease = absl::Minutes(10)}));
  ASSERT_OK_AND_ASSIGN(std::vector<LockInfo> listed, other->Admin().List(""));
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].name, "new");
  EXPECT_EQ(listed[0].holder_live, std::optional<bool>(true));
  EXPECT_EQ(listed[1].name, "old");
  EXPECT_EQ(listed[1].holder_live, std::optional<bool>(false));

  // The old hold is taken over at once, the new one is not.
  ASSERT_OK_AND_ASSIGN(auto old_wanted, other->GetLock("old"));
  ASSERT_OK_AND_ASSIGN(Hold taken, old_wanted->TryAcquire());
  EXPECT_GT(taken.fencing_token(), old_hold.fencing_token());
  ASSERT_OK_AND_ASSIGN(auto new_wanted, other->GetLock("new"));
  EXPECT_EQ(new_wanted->TryAcquire().status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(new_hold.state(), LockState::kHeld);
  faults->Clear(FaultPlan::kRelease);
  EXPECT_OK(new_hold.Release());
  EXPECT_OK(taken.Release());
}

// The liveness twin of AWaiterWhoseWatchMissedTheReleaseWakesAtItsPoll: the
// deletion of the holder's liveness key never reaches the waiter's watch,
// and the waiter takes the hold over at its next fallback look, though it
// saw the holder live before (it trusts that only until then).
TEST_F(EtcdBackendFaultTest, AWaiterWhoseWatchMissedALapseTakesOverAtItsPoll) {
  constexpr absl::Duration kTtl = absl::Seconds(1);
  constexpr absl::Duration kPoll = absl::Seconds(2);
  FaultProxy proxy;
  ASSERT_OK(proxy.Start("127.0.0.1", server_->client_port(0)));
  auto faults = std::make_shared<FaultPlan>();
  ClientOptions holder_options;
  holder_options.liveness_ttl = kTtl;
  holder_options.backend_decorator = faults->Decorator();
  ASSERT_OK_AND_ASSIGN(auto holder_client, Connect(Uri(), holder_options));
  ClientOptions waiter_options;
  waiter_options.fallback_poll = kPoll;
  ASSERT_OK_AND_ASSIGN(auto waiter_client,
                       Connect(UriThrough(proxy), waiter_options));
  ASSERT_OK_AND_ASSIGN(auto held, holder_client->GetLock("lapsed"));
  ASSERT_OK_AND_ASSIGN(auto wanted, waiter_client->GetLock("lapsed"));
  ASSERT_OK_AND_ASSIGN(Hold holder,
                       held->Acquire({.lease = absl::Minutes(10)}));

  Waiter waiter;
  StartWaiter(*wanted, waiter);
  absl::SleepFor(absl::Milliseconds(500));
  // The waiter's watches are on the first member: held there for good.
  proxy.SetFault(Direction::kReplies, Fault::Stall());
  // The holder's heartbeats stop reaching etcd, and so does the release
  // its core sends once it tells the hold lost: only a takeover frees it.
  faults->Set(FaultPlan::kLiveness, {.fail_before = true});
  faults->Set(FaultPlan::kRelease, {.fail_before = true});
  const absl::Time stopped = absl::Now();
  waiter.thread.join();

  ASSERT_OK(waiter.hold);
  EXPECT_EQ(holder.state(), LockState::kLost);
  EXPECT_GT(waiter.hold->fencing_token(), holder.fencing_token());
  // The TTL and etcd's expiry (half a second late at most), a fallback
  // poll, the lost attempt on the first member (500ms) and a few round
  // trips; not the ten-minute lease nor the 20 s wait.
  EXPECT_LE(waiter.done - stopped, kTtl + kPoll + absl::Seconds(3));
  EXPECT_OK(waiter.hold->Release());
  proxy.SetFault(Direction::kReplies, Fault::Pass(), Held::kDiscard);
  faults->Clear(FaultPlan::kRelease);
}

// A waiter that waited longer than its own liveness TTL for a dead holder:
// the grant counts from when it was sent, not from when the waiter's lease
// or liveness key were last kept alive before its wait, so the core
// believes what it got (`dlock run --wait 30s` after a killed `dlock run
// --lease 10m` was told "the reply took 2.2 s, past the hold's deadline").
TEST_F(EtcdBackendFaultTest, AWaiterThatWaitedPastItsTtlHoldsWhatItGets) {
  auto faults = std::make_shared<FaultPlan>();
  ClientOptions holder_options;
  holder_options.liveness_ttl = absl::Seconds(2);
  holder_options.backend_decorator = faults->Decorator();
  ASSERT_OK_AND_ASSIGN(auto holder_client, Connect(Uri(), holder_options));
  ClientOptions waiter_options;
  waiter_options.liveness_ttl = absl::Seconds(1);
  ASSERT_OK_AND_ASSIGN(auto waiter_client, Connect(Uri(), waiter_options));
  ASSERT_OK_AND_ASSIGN(auto held, holder_client->GetLock("waited"));
  ASSERT_OK_AND_ASSIGN(auto wanted, waiter_client->GetLock("waited"));
  ASSERT_OK_AND_ASSIGN(Hold holder,
                       held->Acquire({.lease = absl::Minutes(10)}));
  // The holder dies: no heartbeat, no release reaches etcd.
  faults->Set(FaultPlan::kLiveness, {.fail_before = true});
  faults->Set(FaultPlan::kRelease, {.fail_before = true});
  const absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(Hold taken,  // a 30 s watchdog lease
                       wanted->Acquire({.wait = absl::Seconds(20)}));
  EXPECT_GT(absl::Now() - start, absl::Seconds(1)) << "no wait past the TTL";
  EXPECT_EQ(taken.state(), LockState::kHeld);
  EXPECT_GT(taken.fencing_token(), holder.fencing_token());
  EXPECT_OK(taken.Release());
  faults->Clear(FaultPlan::kRelease);
}

// A client keeps one liveness key while it holds, none with liveness off,
// and revokes its key when it closes, rather than leaving it for its TTL.
TEST_F(EtcdBackendFaultTest, AClosedClientLeavesNoLivenessKey) {
  const int before = LivenessKeys();
  ClientOptions off;
  off.liveness_ttl = absl::InfiniteDuration();
  ASSERT_OK_AND_ASSIGN(auto unlive, Connect(Uri(), off));
  ASSERT_OK_AND_ASSIGN(Hold lease_only, (*unlive->GetLock("a"))->Acquire());
  EXPECT_EQ(LivenessKeys(), before);
  ASSERT_OK_AND_ASSIGN(LockInfo info, unlive->Admin().Inspect("a"));
  EXPECT_EQ(info.holder_live, std::nullopt);  // its lease alone ends it
  EXPECT_OK(lease_only.Release());

  ASSERT_OK_AND_ASSIGN(auto client, Connect(Uri()));
  ASSERT_OK_AND_ASSIGN(Hold first, (*client->GetLock("a"))->Acquire());
  ASSERT_OK_AND_ASSIGN(Hold second, (*client->GetLock("b"))->Acquire());
  EXPECT_EQ(LivenessKeys(), before + 1);
  ASSERT_OK(client->Close());
  EXPECT_EQ(LivenessKeys(), before);
}

// The primitives' keys sit beside the locks' in the namespace (etcd.md,
// Layout): listing locks shows none of them, and a force unlock of a lock
// ends its readers too, so that a writer gets in at once.
TEST_F(EtcdBackendFaultTest,
       PrimitivesKeysAreNoLocksAndForceUnlockEndsReaders) {
  ASSERT_OK_AND_ASSIGN(auto client, Connect(Uri()));
  ASSERT_OK_AND_ASSIGN(auto other, Connect(Uri()));
  ASSERT_OK_AND_ASSIGN(auto rw, client->GetReadWriteLock("a"));
  ASSERT_OK_AND_ASSIGN(auto sem, client->GetSemaphore("a", 2));
  ASSERT_OK_AND_ASSIGN(auto election, client->GetElection("a"));
  ASSERT_OK_AND_ASSIGN(Hold read, rw->AcquireRead());
  ASSERT_OK_AND_ASSIGN(Permit permit, sem->Acquire());
  ASSERT_OK_AND_ASSIGN(Leadership leader, election->Campaign("v"));
  ASSERT_OK_AND_ASSIGN(std::vector<LockInfo> locks, other->Admin().List(""));
  EXPECT_TRUE(locks.empty())
      << locks.size() << " listed, first " << locks[0].name;
  for (ObjectKind kind : {ObjectKind::kSemaphore, ObjectKind::kElection}) {
    ASSERT_OK_AND_ASSIGN(std::vector<ObjectInfo> objects,
                         other->Admin().ListObjects(kind));
    ASSERT_EQ(objects.size(), 1u) << ObjectKindName(kind);
    EXPECT_EQ(objects[0].name, "a");
  }

  ASSERT_OK(
      other->Admin().ForceUnlockObject(ObjectKind::kLock, "a", std::nullopt));
  ASSERT_OK_AND_ASSIGN(ObjectInfo lock, rw->Inspect());
  EXPECT_TRUE(lock.holders.empty());
  ASSERT_OK_AND_ASSIGN(auto write, other->GetLock("a"));
  ASSERT_OK_AND_ASSIGN(Hold written, write->TryAcquire());
  EXPECT_OK(written.Release());
  // The other kinds of "a" are untouched.
  ASSERT_OK_AND_ASSIGN(ObjectInfo permits, sem->Inspect());
  EXPECT_EQ(permits.holders.size(), 1u);
  EXPECT_OK(permit.Release());
  EXPECT_OK(leader.Resign());
}

// A reader of a free lock is granted by one Txn, as a writer is, so that a
// release wakes readers and waiting writers into a race on equal terms.
// With a look before its put, a reader came second to every writer woken
// with it: under writers waiting on one another, readers seldom held
// together (the history checker's read-write workload).
TEST_F(EtcdBackendFaultTest, AReaderOfAFreeLockIsGrantedByOneTxn) {
  ASSERT_OK_AND_ASSIGN(auto client, Connect(Uri()));
  ASSERT_OK_AND_ASSIGN(auto warm, client->GetReadWriteLock("warm"));
  ASSERT_OK_AND_ASSIGN(auto rw, client->GetReadWriteLock("a"));
  // Held throughout: the client's liveness key is begun before counting.
  ASSERT_OK_AND_ASSIGN(Hold warmed, warm->AcquireRead());
  ASSERT_OK_AND_ASSIGN(const int64_t txns, server_->CallsHandled("Txn"));
  ASSERT_OK_AND_ASSIGN(const int64_t ranges, server_->CallsHandled("Range"));
  ASSERT_OK_AND_ASSIGN(Hold read, rw->AcquireRead());
  ASSERT_OK_AND_ASSIGN(const int64_t txns_then, server_->CallsHandled("Txn"));
  ASSERT_OK_AND_ASSIGN(const int64_t ranges_then,
                       server_->CallsHandled("Range"));
  EXPECT_EQ(txns_then - txns, 1) << "Txns to grant a reader";
  EXPECT_EQ(ranges_then - ranges, 0) << "Ranges to grant a reader";
  EXPECT_OK(read.Release());
  EXPECT_OK(warmed.Release());
}

}  // namespace
}  // namespace dlock::test
