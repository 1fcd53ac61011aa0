// Copyright dlock authors. The etcd:// backend's spare leases (issue 25,
// backends/etcd/etcd_spares.h), on a real etcd started by the test: a lease
// length acquired again gets leases granted ahead, so that the next
// acquisition's hold goes on a lease granted before it began (no grant on
// its path); a released hold's lease carries the next hold, so that
// back-to-back pairs grant and revoke none; a client that acquires once
// grants one lease, its hold's; a closed client revokes its spares, and so
// does one that stopped acquiring.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "etcd_server.h"
#include "etcd_server_suite.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

using ::testing::Contains;
using ::testing::IsEmpty;
using ::testing::Not;

class EtcdSparesTest : public EtcdServerSuite<EtcdSparesTest> {
 public:
  static EtcdServer::Options ServerOptions() { return {}; }

 protected:
  // The leases etcd knows that carry none of dlock's keys: spares (every
  // other client of the suite's server is closed).
  static absl::StatusOr<std::vector<int64_t>> Spares() {
    absl::StatusOr<std::string> list = server_->Etcdctl({"lease", "list"});
    if (!list.ok()) return list.status();
    absl::StatusOr<std::vector<int64_t>> carrying =
        LeaseFields({"get", "--prefix", "/dlock/", "-w", "json"});
    if (!carrying.ok()) return carrying.status();
    std::vector<int64_t> spares;
    // "found N leases", then one id a line, in hexadecimal.
    for (absl::string_view line : absl::StrSplit(*list, '\n')) {
      if (line.empty() || absl::StartsWith(line, "found")) continue;
      const int64_t lease = static_cast<int64_t>(
          std::strtoull(std::string(line).c_str(), nullptr, 16));
      if (!absl::c_linear_search(*carrying, lease)) spares.push_back(lease);
    }
    return spares;
  }

  // Waits for `count` spares; a generous bound that only catches a pool
  // that grants none.
  static std::vector<int64_t> AwaitSpares(size_t count) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (absl::Now() < give_up) {
      absl::StatusOr<std::vector<int64_t>> spares = Spares();
      if (!spares.ok()) {
        ADD_FAILURE() << spares.status();
        return {};
      }
      if (spares->size() >= count) return *spares;
      absl::SleepFor(absl::Milliseconds(20));
    }
    ADD_FAILURE() << "fewer than " << count << " spares within 10s";
    return {};
  }

  // The lease the lock's key lives on.
  int64_t KeyLease(const std::string& name) const {
    absl::StatusOr<std::vector<int64_t>> leases = LeaseFields(
        {"get", absl::StrCat("/dlock/", ns_, "/", name), "-w", "json"});
    if (!leases.ok() || leases->size() != 1) {
      ADD_FAILURE() << "the key of '" << name
                    << "' on no one lease: " << leases.status();
      return 0;
    }
    return leases->front();
  }

  // etcd no longer knows the lease (LeaseTimeToLive's TTL -1).
  static bool Gone(int64_t lease) {
    absl::StatusOr<std::string> ttl = server_->Etcdctl(
        {"lease", "timetolive", absl::StrFormat("%x", lease), "-w", "json"});
    if (!ttl.ok()) {
      ADD_FAILURE() << ttl.status();
      return false;
    }
    return absl::StrContains(*ttl, "\"ttl\":-1");
  }

  // How many calls of `method` etcd handled.
  static int64_t Calls(const std::string& method) {
    absl::StatusOr<int64_t> calls = server_->CallsHandled(method);
    if (!calls.ok()) ADD_FAILURE() << calls.status();
    return calls.value_or(-1);
  }
  static int64_t Grants() { return Calls("LeaseGrant"); }

  // A client of the test's namespace whose lock "job" was acquired and
  // released back to back with 10 s leases, and its two spares. Twice in a
  // row puts the length in demand: the pool wants one spare from then on.
  // Whether its thread grants one, or the second hold's lease comes back
  // first, depends on the scheduler; so a third hold waits, held, for the
  // spare that replaces the one it took, and its lease then comes back too.
  // From two spares on, a pair leaves one ready while it holds the other:
  // the thread has nothing to grant.
  std::vector<int64_t> WarmUp() {
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        Connect(server_->Uri(ns_));
    if (!client.ok()) {
      ADD_FAILURE() << client.status();
      return {};
    }
    client_ = *std::move(client);
    absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
        client_->GetLock("job");
    if (!lock.ok()) {
      ADD_FAILURE() << lock.status();
      return {};
    }
    lock_ = *std::move(lock);
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<Hold> hold = lock_->Acquire(kTenSeconds);
      if (!hold.ok()) {
        ADD_FAILURE() << "pair " << i << ": " << hold.status();
        return {};
      }
      if (i == 2 && AwaitSpares(1).empty()) return {};
      if (absl::Status released = hold->Release(); !released.ok()) {
        ADD_FAILURE() << "pair " << i << ": " << released;
        return {};
      }
    }
    return AwaitSpares(2);
  }

  static inline const AcquireOptions kTenSeconds{.lease = absl::Seconds(10)};
  std::unique_ptr<LockClient> client_;
  std::unique_ptr<DistributedLock> lock_;
};

TEST_F(EtcdSparesTest, ALeaseAcquiredAgainGoesOnALeaseGrantedAhead) {
  const std::vector<int64_t> spares = WarmUp();
  ASSERT_THAT(spares, Not(IsEmpty()));

  ASSERT_OK_AND_ASSIGN(Hold hold, lock_->Acquire(kTenSeconds));
  // Its lease was granted before it began: no grant on its path.
  EXPECT_THAT(spares, Contains(KeyLease("job")));
  ASSERT_OK_AND_ASSIGN(LockInfo info, client_->Admin().Inspect("job"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.fencing_token, hold.fencing_token());
  EXPECT_OK(hold.Release());
  ASSERT_OK(client_->Close());
}

// A released hold's lease (a thread's, untouched since its create) goes
// back to the spares and carries the next hold: back-to-back pairs are a
// create and a delete each, two Raft writes as the ceiling's, with no lease
// granted or revoked.
TEST_F(EtcdSparesTest, BackToBackPairsGrantAndRevokeNoLease) {
  ASSERT_THAT(WarmUp(), Not(IsEmpty()));
  // The grant the pool's thread may have under way, answered.
  int64_t grants = Grants();
  for (int look = 0; look < 100; ++look) {
    absl::SleepFor(absl::Milliseconds(100));
    if (Grants() == grants) break;
    grants = Grants();
  }
  const int64_t revokes = Calls("LeaseRevoke");
  int64_t lease = 0;
  for (int i = 0; i < 20; ++i) {
    ASSERT_OK_AND_ASSIGN(Hold hold, lock_->Acquire(kTenSeconds));
    if (i == 0) lease = KeyLease("job");
    ASSERT_OK(hold.Release());
  }
  EXPECT_EQ(Grants() - grants, 0);
  EXPECT_EQ(Calls("LeaseRevoke") - revokes, 0);
  // The lease the pairs went on lives on as a spare (no key), till Close.
  ASSERT_OK_AND_ASSIGN(const std::vector<int64_t> spares, Spares());
  EXPECT_THAT(spares, Contains(lease));
  ASSERT_OK(client_->Close());
  EXPECT_TRUE(Gone(lease));
}

TEST_F(EtcdSparesTest, AClientThatAcquiresOnceGrantsOneLease) {
  ClientOptions no_liveness;  // whose key would have a lease of its own
  no_liveness.liveness_ttl = absl::InfiniteDuration();
  const int64_t before = Grants();
  ASSERT_OK_AND_ASSIGN(auto client, Connect(server_->Uri(ns_), no_liveness));
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("once"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire(kTenSeconds));
  EXPECT_OK(hold.Release());
  ASSERT_OK(client->Close());
  EXPECT_EQ(Grants() - before, 1);  // the hold's
}

TEST_F(EtcdSparesTest, AClosedClientRevokesItsSpares) {
  const std::vector<int64_t> spares = WarmUp();
  ASSERT_THAT(spares, Not(IsEmpty()));
  ASSERT_OK(client_->Close());
  // Revoked, not left to run out their 10s.
  for (int64_t spare : spares) EXPECT_TRUE(Gone(spare)) << spare;
  ASSERT_OK_AND_ASSIGN(const std::vector<int64_t> left, Spares());
  EXPECT_THAT(left, IsEmpty());
}

// Spares of a length nobody acquires any more are revoked (after 5 s), not
// kept alive for as long as the client lives.
TEST_F(EtcdSparesTest, SparesOfALengthNoLongerAcquiredAreRevoked) {
  const std::vector<int64_t> spares = WarmUp();
  ASSERT_THAT(spares, Not(IsEmpty()));
  const absl::Time give_up = absl::Now() + absl::Seconds(20);  // a hang
  while (!absl::c_all_of(spares, Gone) && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(200));
  }
  for (int64_t spare : spares) EXPECT_TRUE(Gone(spare)) << spare;
  // Acquired again, the hold gets a lease of its own, as at first.
  ASSERT_OK_AND_ASSIGN(Hold hold, lock_->Acquire(kTenSeconds));
  EXPECT_THAT(spares, Not(Contains(KeyLease("job"))));
  EXPECT_OK(hold.Release());
  ASSERT_OK(client_->Close());
}

}  // namespace
}  // namespace dlock::test
