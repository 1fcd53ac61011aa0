// Copyright dlock authors. Starting the command of `dlock run`: finding it,
// its environment, and a fork/exec that only does async-signal-safe work in
// the child (the parent has threads: the client's watchdog and connections).
#ifndef DLOCK_ADAPTERS_CLI_CHILD_PROCESS_H_
#define DLOCK_ADAPTERS_CLI_CHILD_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dlock/adapters/config.h"

namespace dlock::cli {

// Finds `command` on $PATH as execvp() would. NotFound, or PermissionDenied
// when it exists but cannot be executed.
absl::StatusOr<std::string> ResolveCommand(const std::string& command);

// The variables of our environment that hold the backend's secrets:
// DLOCK_BACKEND (its URI may carry a password) and the one the profile's
// password_env names. A command dlock starts gets none of them unless the
// user passes it by name (`dlock run --pass-env VAR`): those in `passed` are
// left out of the list.
std::vector<std::string> SecretVariables(
    const Profile& profile, const std::vector<std::string>& passed = {});

// A variable dlock sets for the command: DLOCK_LOCK_NAME and the rest.
struct EnvVar {
  std::string name;
  std::string value;
};

// Our environment without the variables named in `withheld` and without
// any that an outer dlock set (DLOCK_LOCK_NAME, DLOCK_PERMIT_SLOTS, ...: a
// nested run must not see its parent's), plus `set`.
std::vector<std::string> ChildEnvironment(
    const std::vector<EnvVar>& set, const std::vector<std::string>& withheld);
// The variables of a lock's hold: DLOCK_LOCK_NAME and DLOCK_FENCING_TOKEN.
std::vector<std::string> ChildEnvironment(
    const std::string& name, uint64_t token,
    const std::vector<std::string>& withheld);

struct Spawned {
  pid_t pid = -1;     // the command, leader of its own process group
  int exit_code = 0;  // when pid < 0: why not (126, 127, 70), printed
};

// Starts `path` in its own process group (as timeout(1) does, so that
// signals reach everything it starts), with all signals unblocked and
// `death_signal` as its PR_SET_PDEATHSIG.
Spawned Spawn(const std::string& path, std::vector<std::string> argv,
              std::vector<std::string> env, int death_signal);

// A wait status as a shell reports it: the code, or 128 + the signal.
int ExitCodeOfChild(int status);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_CHILD_PROCESS_H_
