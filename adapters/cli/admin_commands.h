// Copyright dlock authors. `dlock status`, `dlock list`, `dlock unlock`.
#ifndef DLOCK_ADAPTERS_CLI_ADMIN_COMMANDS_H_
#define DLOCK_ADAPTERS_CLI_ADMIN_COMMANDS_H_

#include <cstdint>
#include <string>

#include "cli_common.h"

namespace dlock::cli {

int StatusCommand(const BackendFlags& flags, const std::string& name);
// `kind` empty: the locks held by a writer as ever, then the other objects
// where the backend lists them; else only objects of that kind.
int ListCommand(const BackendFlags& flags, const std::string& prefix,
                const std::string& kind);
// `token` non-zero: only while the lock is held with that fencing token.
// `kind` given: every hold of that object (ForceUnlockObject), or the one
// with `token`.
int UnlockCommand(const BackendFlags& flags, const std::string& name,
                  bool force, uint64_t token, const std::string& kind);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_ADMIN_COMMANDS_H_
