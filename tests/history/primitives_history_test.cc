// Copyright dlock authors. The history checker on the primitives beyond the
// mutex (issue 24, docs/design/primitives.md "History-checker workloads"):
// worker processes contend for a semaphore's permits, a read-write lock's
// two sides, or an election, while a fault hits a holder. Pass criteria, as
// the mutex's (history_test.cc), per object:
// - semaphore of N: never more than N holders believed at once (and N
//   reached), no two believed holders of one permit slot, the fence of each
//   slot's resource accepted nothing stale, a killed holder's permit granted
//   again within its lease (C22);
// - read-write lock: no writer believed beside any holder, readers seen
//   together (C23);
// - election: never two believed leaders, terms increasing, a deposed
//   leader told before its successor's election (C24);
// - multi-lock: workers taking 3 of 4 locks at once in random orders: no
//   deadlock (every worker keeps getting them), no two believed holders of
//   one lock, each lock's fence kept (C25);
// and every loss told once and in time, every worker back after the fault.
// Each result is printed as a line "HISTORY <backend> <workload> <fault>".
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "history_backends.h"
#include "history_expect.h"
#include "history_run.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

constexpr absl::Duration kLease = absl::Seconds(1);
constexpr absl::Duration kWarmUp = absl::Seconds(20);
// Once the fault healed, every worker must have held again within this:
// holds last a second, and no backend but ZooKeeper queues fairly.
constexpr absl::Duration kRecover = absl::Seconds(30);
constexpr int kPermits = 2;
// A hold: steps of 40 ms, each with a write and an increment.
constexpr int kStepsPerHold = 25;

enum class Workload { kSemaphore, kReadWrite, kElection, kMulti };

struct Case {
  std::string backend;
  Workload workload;
  HolderFault fault;
  // Whether workers reach the servers through their proxies; a client
  // that dials the servers a map names (Redis Cluster) reaches them itself.
  bool proxied = true;
};

std::string Name(Workload w) {
  switch (w) {
    case Workload::kSemaphore:
      return "semaphore";
    case Workload::kReadWrite:
      return "rw";
    case Workload::kElection:
      return "election";
    case Workload::kMulti:
      return "multi";
  }
  return "?";
}

std::string Name(HolderFault f) {
  switch (f) {
    case HolderFault::kKill:
      return "holder_killed";
    case HolderFault::kPause:
      return "holder_paused";
    case HolderFault::kPartition:
      return "holder_partitioned";
  }
  return "?";
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return absl::StrCat(info.param.backend, "_", Name(info.param.workload), "_",
                      Name(info.param.fault));
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.backend << " " << Name(c.workload) << " " << Name(c.fault);
}

// The workers of a workload: K > N for a semaphore, readers beside two
// writers, three campaigners, more multi-lock workers than fit at once.
RunOptions WorkloadOptions(Workload w, const HistoryProfile& profile) {
  RunOptions options;
  options.lease = kLease;
  switch (w) {
    case Workload::kSemaphore:
      options.primitive = absl::StrCat("semaphore:", kPermits);
      options.workers = profile.workers + 1;
      break;
    case Workload::kReadWrite:
      // Two writers, and readers enough that some queue side by side
      // between them: with two readers, a waiting writer's intent stood
      // between them so often that a short run saw them together 0 to 2
      // times (0 failed a CI run on ZooKeeper).
      options.primitive = "rw";
      options.workers = profile.workers + 3;
      options.readers = options.workers - 2;
      break;
    case Workload::kElection:
      options.primitive = "election";
      options.workers = profile.workers;
      break;
    case Workload::kMulti:
      options.primitive = "multi:4:3";
      options.workers = profile.workers + 1;
      break;
  }
  // Faults land in the middle of a hold; a kill's recovery is measured
  // either way.
  options.steps = kStepsPerHold;
  return options;
}

void ExpectWorkloadKept(const Case& c, const HistoryReport& report,
                        HistoryBackend& backend) {
  // A worker paused in the middle of its read-modify-write finishes it
  // after its lease: only the fence can stop that.
  ExpectContractKept(report, c.fault == HolderFault::kPause, kRecover);
  if (c.fault == HolderFault::kKill) {
    // The checker measures a multi-lock's from the kill to the next grant
    // to another owner (history_checker.h): the lease and a look, as a
    // lock's.
    const absl::Duration bound = backend.KilledHolderBound(kLease);
    EXPECT_GE(report.max_recovery_ns, 0) << report.Summary();
    EXPECT_LT(report.max_recovery_ns, absl::ToInt64Nanoseconds(bound))
        << "the killed holder's grant came back late: " << report.Summary();
  }
  switch (c.workload) {
    case Workload::kSemaphore:
      EXPECT_EQ(report.max_believed_at_once, kPermits)
          << "more holders than permits, or never all permits in use: "
          << report.Summary();
      break;
    case Workload::kReadWrite:
      EXPECT_GT(report.shared_overlaps, 0)
          << "readers never held together: " << report.Summary();
      break;
    case Workload::kElection:
      EXPECT_EQ(report.max_believed_at_once, 1) << report.Summary();
      break;
    case Workload::kMulti:
      break;  // per lock, above; no deadlock: every worker came back
  }
}

class PrimitivesHistory : public ::testing::TestWithParam<Case> {};

TEST_P(PrimitivesHistory, ContractHoldsUnderTheFault) {
  const Case& c = GetParam();
  const HistoryProfile profile = CurrentHistoryProfile();
  absl::StatusOr<HistoryBackend*> backend = SharedBackend(c.backend);
  ASSERT_OK(backend);
  for (int round = 0; round < profile.rounds; ++round) {
    RunOptions options = WorkloadOptions(c.workload, profile);
    options.upstream_port = (*backend)->port();
    options.uri = [&](int port, const std::string& ns, int i) {
      return (*backend)->Uri(ns, i,
                             WorkerUri{.proxy_port = c.proxied ? port : 0});
    };
    absl::StatusOr<std::unique_ptr<HistoryRun>> run = HistoryRun::Start(
        absl::StrCat(c.backend, "-", Name(c.workload), "-", Name(c.fault)),
        options);
    ASSERT_OK(run);
    ASSERT_OK((*run)->WaitForWrites(5, kWarmUp))
        << "the workers never got going";
    const absl::Duration lasting =
        c.fault == HolderFault::kKill ? 2 * kLease : profile.fault;
    ASSERT_OK((*run)->FaultHolder(c.fault, lasting).status());
    (*run)->Healed(kRecover);
    const HistoryReport report = (*run)->Finish();
    std::cout << "HISTORY " << c.backend << " " << Name(c.workload) << " "
              << Name(c.fault) << ": " << report.Summary() << std::endl;
    ExpectWorkloadKept(c, report, **backend);
  }
}

// The backends that offer each primitive (docs/backends.md, "Declared
// primitives"), and the faults CI runs on them; the long profile runs
// every fault on every workload.
std::vector<Case> Cases() {
  const std::vector<std::string> built = BuiltBackends();
  const bool all = CurrentHistoryProfile().long_profile;
  using W = Workload;
  using F = HolderFault;
  struct Offer {
    std::string backend;
    std::vector<W> workloads;
    // A worker's proxy stands before one server: on Redlock it would cut
    // one master of three (its partitions: redlock_history_test.cc).
    bool partitions = true;
    // Whether workers reach the servers through their proxies (above).
    bool proxied = true;
    // CI: a killed holder only, for every workload (the clean clone's run
    // has no time left for more); the long profile runs every fault.
    bool ci_kill_only = false;
  };
  const std::vector<W> all_four = {W::kMulti, W::kSemaphore, W::kElection,
                                   W::kReadWrite};
  // Multi-locks work on every backend (taken in one global order where a
  // backend has no atomic form).
  const std::vector<Offer> offers = {
      {.backend = "redis", .workloads = all_four},
      {.backend = "redlock3",
       .workloads = {W::kMulti, W::kElection, W::kReadWrite},
       .partitions = false,
       .ci_kill_only = true},
      // A cluster client dials the masters its slot map names, past any
      // proxy: no partitions of one worker.
      {.backend = "redis_cluster",
       .workloads = all_four,
       .partitions = false,
       .proxied = false,
       .ci_kill_only = true},
      // Sentinel: the one-master scripts, found through the Sentinels
      // (whose client dials the master they name, past any proxy).
      {.backend = "redis_sentinel",
       .workloads = all_four,
       .partitions = false,
       .proxied = false,
       .ci_kill_only = true},
      {.backend = "postgres_lease", .workloads = all_four},
      // Session mode: holds on advisory locks of sessions of their own.
      {.backend = "postgres_session",
       .workloads = all_four,
       .ci_kill_only = true},
      {.backend = "zookeeper", .workloads = all_four},
      {.backend = "etcd", .workloads = all_four}};
  std::vector<Case> cases;
  for (const Offer& offer : offers) {
    if (std::find(built.begin(), built.end(), offer.backend) == built.end()) {
      continue;
    }
    for (W w : offer.workloads) {
      for (F f : {F::kKill, F::kPause, F::kPartition}) {
        // CI: a killed holder for every workload, a partitioned one for
        // the semaphore and the election.
        const bool short_case =
            f == F::kKill || (f == F::kPartition && !offer.ci_kill_only &&
                              (w == W::kSemaphore || w == W::kElection));
        if (f == F::kPartition && !offer.partitions) continue;
        if (all || short_case) {
          cases.push_back({offer.backend, w, f, offer.proxied});
        }
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Backends, PrimitivesHistory,
                         ::testing::ValuesIn(Cases()), CaseName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PrimitivesHistory);

}  // namespace
}  // namespace dlock::test
