// Copyright dlock authors. Waiters ride out a Sentinel failover (issue 19
// §6): workers contend with Acquire(wait 60s) through redis-sentinel:// with
// wait_replicas=1 while the master is killed with SIGKILL, the Sentinels
// promote the replica and the killed server comes back as its replica. Until
// then every attempt meets Unavailable (connection refused, a Sentinel still
// naming the dead master, a grant no replica took): a waiting acquire rides
// it out, so no worker sees an error, nobody holds the lock twice, and the
// fencing tokens keep rising. DLOCK_HISTORY_PROFILE=long fails over three
// times. Prints a "FAILOVER sentinel ..." line with the figures.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "failover_contention.h"
#include "gtest/gtest.h"
#include "redis_sentinel_group.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

int Rounds() {
  const char* p = std::getenv("DLOCK_HISTORY_PROFILE");
  return p != nullptr && std::string(p) == "long" ? 3 : 1;
}

std::string Ms(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

TEST(RedisSentinelFailover, WaitersRideOutTheMastersDeath) {
  absl::StatusOr<std::unique_ptr<RedisSentinelGroup>> group =
      RedisSentinelGroup::Start();
  ASSERT_OK(group);
  const std::string uri =
      absl::StrCat("redis-sentinel://", (*group)->SentinelUri(), "/",
                   (*group)->master_name(),
                   "?namespace=ride-out&wait_replicas=1&wait_timeout=500ms");
  ContentionOptions options;
  Contention contention([&](int) { return uri; }, options);
  ASSERT_TRUE(contention.WaitForGrants(10, absl::Seconds(30)))
      << "the workers never got going";

  std::string figures;
  for (int round = 0; round < Rounds(); ++round) {
    absl::StatusOr<int> old_master = (*group)->CurrentMasterPort();
    ASSERT_OK(old_master);
    if (round == 0) contention.MarkFault();
    const absl::Time killed = absl::Now();
    ASSERT_OK((*group)->KillMaster());
    absl::StatusOr<int> promoted = (*group)->WaitForFailoverFrom(*old_master);
    ASSERT_OK(promoted) << (*group)->LogTails();
    const absl::Time promoted_at = absl::Now();
    // wait_replicas=1 needs a replica again: until then no grant counts.
    ASSERT_OK((*group)->RestartKilled()) << (*group)->LogTails();
    const absl::Time replica_at = absl::Now();
    const int before = contention.grants();
    ASSERT_TRUE(contention.WaitForGrants(before + 2 * options.workers,
                                         absl::Seconds(60)))
        << "the workers stopped getting the lock after the failover";
    absl::StrAppend(&figures, " [promoted ", Ms(promoted_at - killed),
                    " after the kill, replica back ", Ms(replica_at - killed),
                    "]");
  }
  const ContentionReport report = contention.Stop();
  std::cout << "FAILOVER sentinel, " << options.workers
            << " waiters with wait 60s, wait_replicas=1:" << figures << " "
            << report.Summary() << std::endl;
  ExpectRodeOut(report, 2 * options.workers);
}

}  // namespace
}  // namespace dlock::test
