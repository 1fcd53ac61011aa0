// Copyright dlock authors. `dlock elect` (run a command while leader) and
// `dlock leader` (who leads, and --watch for changes).
#ifndef DLOCK_ADAPTERS_CLI_ELECTION_COMMANDS_H_
#define DLOCK_ADAPTERS_CLI_ELECTION_COMMANDS_H_

#include <string>

#include "cli_common.h"
#include "run_command.h"

namespace dlock::cli {

// Campaigns in election run.name with `value` (empty: <hostname>:<pid>)
// and runs run.command while leader, as `dlock run` runs it under a lock.
int ElectCommand(const BackendFlags& flags, const RunFlags& run,
                 const std::string& value);

// Prints the leader of `name` (flags.json: as JSON); with `watch`, one line
// per change until SIGINT or SIGTERM.
int LeaderCommand(const BackendFlags& flags, const std::string& name,
                  bool watch);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_ELECTION_COMMANDS_H_
