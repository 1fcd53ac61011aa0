// Copyright dlock authors. `dlock run` for scheduled jobs: run a command at
// most once per slot across machines (--once-per, --slot), keep others out
// for a while after its start (--at-least-for), and stop a stuck run
// (--at-most-for). Built on ScheduledJobGuard (dlock/adapters/job_guard.h).
#ifndef DLOCK_ADAPTERS_CLI_RUN_JOB_H_
#define DLOCK_ADAPTERS_CLI_RUN_JOB_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli_common.h"
#include "run_command.h"

namespace dlock::cli {

// One slot of a period, aligned on the Unix epoch in UTC: a period of 1h
// starts its slots on the hour, 1d at 00:00 UTC, 15m at :00, :15, :30, :45.
struct JobSlot {
  std::string id;  // the slot's start, "2026-11-23T02:00:00Z"
  absl::Time start;
  absl::Time end;
};

// The slot of `period` that `now` falls in. InvalidArgument unless the
// period is a whole number of seconds from 1s to 366 days.
absl::StatusOr<JobSlot> SlotOf(absl::Time now, absl::Duration period);

// Whether any of the scheduled-job flags is given.
bool IsScheduledJob(const RunFlags& run);

// Runs `path` (resolved from run.command[0]) as a scheduled job, with the
// --on-lost-signal and --kill-after that `dlock run` parsed; returns the
// exit code (docs/cli.md, "Scheduled jobs").
int RunScheduledJob(const BackendFlags& flags, const RunFlags& run,
                    const Profile& profile, const std::string& path,
                    int lost_signal, absl::Duration kill_after);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_RUN_JOB_H_
