// Copyright dlock authors. `dlock run`: flock(1) across machines.
#ifndef DLOCK_ADAPTERS_CLI_RUN_COMMAND_H_
#define DLOCK_ADAPTERS_CLI_RUN_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cli_common.h"
#include "run_modes.h"

namespace dlock::cli {

struct RunFlags {
  std::string name;  // the first of `names`
  // The names given before `--`: one, or several with --all.
  std::vector<std::string> names;
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
  // Beyond the mutex (docs/cli.md): at most one of these, and none with a
  // scheduled job.
  bool shared = false;       // --shared: a reader of the lock
  int64_t permits = 0;       // --permits N: permits of a semaphore of N
  int64_t take = 0;          // --take K: how many of them (unset: 1)
  bool all = false;          // --all: every name or none
  bool double_dash = false;  // the command came after `--`
};

int RunCommand(const BackendFlags& flags, const RunFlags& run);

// Takes what `mode` names, runs run.command under it and stops the command
// if it is lost, with run's --wait, --lease and loss flags: what `dlock
// run` does in each mode, and `dlock elect`.
int RunUnder(const BackendFlags& flags, const RunFlags& run,
             const RunMode& mode);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_RUN_COMMAND_H_
