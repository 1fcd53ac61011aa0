// Copyright dlock authors. One run of the history checker: worker processes
// (dlock_history_worker) contending for one lock, each reaching the lock
// service through a fault proxy of its own, so that a fault can hit one
// worker's network; the register they write to; and the faults a scenario
// applies to workers (kill, pause, partition, wall-clock step). The backend's
// server and its faults belong to the caller (history_test.cc).
#ifndef DLOCK_TESTS_HISTORY_HISTORY_RUN_H_
#define DLOCK_TESTS_HISTORY_HISTORY_RUN_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "fault_proxy.h"
#include "history_checker.h"
#include "history_register.h"
#include "server_process.h"

namespace dlock::test {

struct RunOptions {
  int workers = 3;
  // The URI worker `i` uses to reach the lock service at 127.0.0.1:port
  // (its proxy's port), in namespace `ns`.
  std::function<std::string(int port, const std::string& ns, int i)> uri;
  std::string upstream_host = "127.0.0.1";
  int upstream_port = 0;
  absl::Duration lease = absl::Seconds(1);  // the watchdog's, per worker
  // Steps of 40 ms a worker works per hold: long holds put a fault in the
  // middle of one.
  int steps = 4;
  // Between holds, a worker waits a random time below this.
  absl::Duration pause = absl::Milliseconds(30);
  bool explicit_lease = false;
  // Workers [0, shared_token_workers) act as one owner with a shared
  // explicit owner token (C6).
  int shared_token_workers = 0;
  // Worker 0 runs under libfaketime, its wall clock moved by
  // SetWallClockOffset() (its monotonic clock is left alone).
  bool fake_wall_clock_of_worker0 = false;
  // What gives a hold up for the checker's notice rule.
  ReleaseRule release_rule = ReleaseRule::kStartedWhileHeld;
  // What the workers contend for (issue 24): "lock"; "semaphore:N" (one
  // permit each, a register cell per slot); "election"; "multi:M:K" (K of M
  // locks at once, a cell per lock); or "rw", a read-write lock, workers
  // [0, readers) readers and the rest writers.
  std::string primitive = "lock";
  int readers = 0;  // with primitive "rw"

  // The register cells a workload guards (a semaphore's N, a multi-lock's
  // M), 0 for one lock.
  int Cells() const;
  // Worker `i`'s --primitive.
  std::string PrimitiveOf(int i) const;
};

// DLOCK_HISTORY_PROFILE=long runs each scenario longer, with more workers,
// three times; the default short profile is what CI runs.
struct HistoryProfile {
  int workers = 3;
  int rounds = 1;
  absl::Duration fault = absl::Seconds(2.5);  // a stall or pause, ~2.5 leases
  bool long_profile = false;
};
HistoryProfile CurrentHistoryProfile();

// What a scenario does to a worker that holds.
enum class HolderFault {
  kKill,       // SIGKILL
  kPause,      // SIGSTOP, then SIGCONT
  kPartition,  // its proxy cut both ways, then healed
};

class HistoryRun {
 public:
  // Starts the register, one proxy and one worker per worker index.
  static absl::StatusOr<std::unique_ptr<HistoryRun>> Start(
      const std::string& name, RunOptions options);
  ~HistoryRun();

  const RunOptions& options() const { return options_; }
  FaultProxy& proxy(int worker) { return *proxies_[worker]; }
  RegisterServer& resource() { return *register_; }

  // Until the register accepted `writes` writes in all; Unavailable naming
  // the workers' logs if it does not happen within `timeout`.
  absl::Status WaitForWrites(int writes, absl::Duration timeout);
  // A worker that holds the lock now (its last grant is not released and it
  // was seen holding it), waiting up to `timeout` for one.
  absl::StatusOr<int> WaitForHolder(absl::Duration timeout);

  // When a worker other than `other_than` was first granted the lock after
  // `since_ns` (MonoNowNs()), waiting up to `timeout` for it; -1 if none was.
  int64_t WaitForGrantToOthers(int other_than, int64_t since_ns,
                               absl::Duration timeout) const;

  // Hits a worker that holds now (waiting up to 10 s for one) with
  // `fault`, lasting `duration` (after a kill: waits that long); returns
  // which worker.
  absl::StatusOr<int> FaultHolder(HolderFault fault, absl::Duration duration);

  void Kill(int worker);    // SIGKILL, recorded for the checker
  void Pause(int worker);   // SIGSTOP
  void Resume(int worker);  // SIGCONT
  // Moves worker 0's wall clock `offset` away from the real one.
  absl::Status SetWallClockOffset(absl::Duration offset);

  // The faults are over: records the time, then waits until every worker
  // still alive has been granted the lock again (or `timeout`).
  void Healed(absl::Duration timeout);
  // Stops the workers (SIGTERM), waits for them, and checks the history.
  // Failures to exit are listed in the report's problems.
  HistoryReport Finish();

 private:
  explicit HistoryRun(RunOptions options) : options_(std::move(options)) {}
  std::vector<WorkerHistory> Histories() const;
  int GrantsSince(int worker, int64_t since_ns) const;

  RunOptions options_;
  std::string dir_;
  std::string ns_;
  std::unique_ptr<RegisterServer> register_;
  std::vector<std::unique_ptr<FaultProxy>> proxies_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
  std::vector<int64_t> killed_at_;
  std::vector<int64_t> paused_at_;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> pauses_;
  int64_t healed_at_ = 0;
};

int64_t MonoNowNs();

}  // namespace dlock::test

#endif  // DLOCK_TESTS_HISTORY_HISTORY_RUN_H_
