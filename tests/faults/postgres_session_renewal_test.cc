// Copyright dlock authors. Session mode's watchdog on a slow network (C7,
// C19): every hold has a session of its own, so a round that renewed them
// one after another would cost a round trip per hold. With replies 25 ms
// late, 40 holds would take a second a round, more than an 800 ms lease
// leaves, and the client would report holds lost that the server kept.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dlock/dlock.h"
#include "fault_proxy.h"
#include "gtest/gtest.h"
#include "postgres_server.h"
#include "postgres_suite.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

class PostgresSessionRenewalTest : public PostgresSuite {};

constexpr int kHolds = 40;
constexpr absl::Duration kLease = absl::Milliseconds(800);
constexpr absl::Duration kReplyDelay = absl::Milliseconds(25);

TEST_F(PostgresSessionRenewalTest, FortyHoldsStayHeldWithRepliesLate) {
  FaultProxy proxy;
  ASSERT_OK(proxy.Start("127.0.0.1", server_->port()));
  auto lost_mu = std::make_shared<absl::Mutex>();
  auto lost = std::make_shared<std::vector<std::string>>();
  ClientOptions options;
  options.watchdog_lease = kLease;
  options.on_lost = [lost_mu, lost](const LockLostEvent& e) {
    absl::MutexLock lock(lost_mu.get());
    lost->push_back(absl::StrCat(e.name, ": ", e.reason.ToString()));
  };
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect(server_->UriAt(proxy.port(), "renewal", "mode=session"), options);
  ASSERT_OK(client);
  std::vector<std::unique_ptr<DistributedLock>> locks;
  std::vector<Hold> holds;
  for (int i = 0; i < kHolds; ++i) {
    absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
        (*client)->GetLock(absl::StrCat("slow-", i));
    ASSERT_OK(lock);
    absl::StatusOr<Hold> hold = (*lock)->Acquire();
    ASSERT_OK(hold);
    locks.push_back(*std::move(lock));
    holds.push_back(*std::move(hold));
  }

  proxy.SetFault(Direction::kReplies, Fault::Delay(kReplyDelay));
  // Three leases: several watchdog rounds, each of which must finish
  // within the lease's slack for every hold.
  absl::SleepFor(3 * kLease);
  proxy.SetFault(Direction::kReplies, Fault::Pass());

  for (int i = 0; i < kHolds; ++i) {
    EXPECT_EQ(holds[i].state(), LockState::kHeld) << locks[i]->name();
  }
  {
    absl::MutexLock lock(lost_mu.get());
    EXPECT_TRUE(lost->empty())
        << lost->size() << " told lost, first " << lost->front();
  }
  for (Hold& hold : holds) EXPECT_OK(hold.Release());
}

}  // namespace
}  // namespace dlock::test
