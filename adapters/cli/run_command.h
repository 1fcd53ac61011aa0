// Copyright dlock authors. `dlock run`: flock(1) across machines.
#ifndef DLOCK_ADAPTERS_CLI_RUN_COMMAND_H_
#define DLOCK_ADAPTERS_CLI_RUN_COMMAND_H_

#include <string>
#include <vector>

#include "cli_common.h"

namespace dlock::cli {

struct RunFlags {
  std::string name;
  std::vector<std::string> command;
  std::string wait;   // empty: the profile's default_wait
  std::string lease;  // empty: the profile's default_lease
  std::string on_lost_signal = "TERM";
  std::string kill_after = "10s";
  // Variables of the backend's secrets (DLOCK_BACKEND, the profile's
  // password_env) that the command gets all the same.
  std::vector<std::string> pass_env;
  // Scheduled jobs (run_job.h): any of these makes the run a job run.
  std::string once_per;      // a period: one run per slot of it
  std::string slot;          // an explicit slot name
  std::string at_least_for;  // others kept out this long after the start
  std::string at_most_for;   // the longest a run may keep others out
  bool quiet_skip = false;   // skips exit 0 and print nothing
  bool quiet = false;        // no notice while waiting for the lock
};

int RunCommand(const BackendFlags& flags, const RunFlags& run);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_RUN_COMMAND_H_
