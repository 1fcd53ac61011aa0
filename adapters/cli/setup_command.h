// Copyright dlock authors. `dlock setup`: what dlock keeps on the server
// besides the locks themselves (PostgreSQL's lock tables and functions),
// created or migrated by a user allowed to, so that applications can run as
// users that may not (docs/postgres.md, "Least privilege").
#ifndef DLOCK_ADAPTERS_CLI_SETUP_COMMAND_H_
#define DLOCK_ADAPTERS_CLI_SETUP_COMMAND_H_

#include <string>

#include "cli_common.h"

namespace dlock::cli {

// Connects once, which creates or migrates the backend's schema, and with
// `grant_to` (PostgreSQL's URI option grant_to) grants that role what dlock
// needs; other backends refuse grant_to.
int SetupCommand(const BackendFlags& flags, const std::string& grant_to);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_SETUP_COMMAND_H_
