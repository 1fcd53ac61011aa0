// Copyright dlock authors. `dlock status`, `dlock list`, `dlock unlock`.
#ifndef DLOCK_ADAPTERS_CLI_ADMIN_COMMANDS_H_
#define DLOCK_ADAPTERS_CLI_ADMIN_COMMANDS_H_

#include <cstdint>
#include <string>

#include "cli_common.h"

namespace dlock::cli {

int StatusCommand(const BackendFlags& flags, const std::string& name);
int ListCommand(const BackendFlags& flags, const std::string& prefix);
// `token` non-zero: only while the lock is held with that fencing token.
int UnlockCommand(const BackendFlags& flags, const std::string& name,
                  bool force, uint64_t token);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_ADMIN_COMMANDS_H_
