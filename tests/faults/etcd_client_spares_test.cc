// Copyright dlock authors. The etcd backend's spare leases
// (backends/etcd/etcd_spares.h) driven by a manual clock against a real
// etcd, for what the end-to-end tests of etcd_spares_test.cc can only meet
// by chance: an acquisition that comes while the pool's thread keeps the
// only spare alive.
#include <memory>
#include <optional>

#include "absl/time/clock.h"
#include "dlock/clock.h"
#include "etcd_client_test_util.h"
#include "etcd_spares.h"

namespace dlock::test {
namespace {

class EtcdClientSparesTest : public EtcdClientSuite<EtcdClientSparesTest> {
 public:
  static EtcdServer::Options ServerOptions() { return {}; }

 protected:
  // Waits for the pool's thread to have filed `count` spares of `lease`; a
  // generous bound that only catches a pool that files none.
  static bool AwaitReady(etcd::SpareLeases& spares, absl::Duration lease,
                         int count) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (spares.ReadyCount(lease) != count) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return true;
  }
};

// The keepalive that refreshes a spare must not hide it: an acquisition
// that comes meanwhile takes it (and does not grant a lease of its own),
// and the keepalive's end neither files it again nor revokes it under the
// hold that now lives on it.
TEST_F(EtcdClientSparesTest, ASpareBeingKeptAliveIsTakenAndNotRevoked) {
  ManualClock clock;
  etcd::SpareLeases spares(*client_, clock, {.per_length = 1, .total = 1});
  const absl::Duration lease = absl::Seconds(10);
  const absl::Duration max_age = absl::Seconds(2);
  // Acquired twice: in demand, so the thread grants one spare.
  EXPECT_EQ(spares.Take(lease, max_age), std::nullopt);
  EXPECT_EQ(spares.Take(lease, max_age), std::nullopt);
  ASSERT_TRUE(AwaitReady(spares, lease, 1)) << "no spare granted within 10s";

  // The spare is due for its keepalive at half the age acquisitions
  // accept; etcd, stopped, holds that keepalive in flight.
  server_->PauseMember(0);
  clock.Advance(max_age / 2);
  absl::SleepFor(absl::Milliseconds(300));  // the thread sends it
  const std::optional<etcd::LeaseState> taken = spares.Take(lease, max_age);
  server_->ResumeMember(0);
  ASSERT_NE(taken, std::nullopt)
      << "an acquisition during the spare's keepalive found no spare";

  // The keepalive's end (and the replacement's grant) come before the
  // thread stops; Shutdown revokes the spares it holds, not the one taken.
  spares.Shutdown();
  ASSERT_OK_AND_ASSIGN(auto ttl, client_->LeaseTimeToLive(taken->id));
  EXPECT_GT(ttl.ttl(), 0) << "the taken spare was revoked";
}

}  // namespace
}  // namespace dlock::test
