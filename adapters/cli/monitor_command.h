// Copyright dlock authors. `dlock monitor`: watching the locks of a
// namespace as a service.
#ifndef DLOCK_ADAPTERS_CLI_MONITOR_COMMAND_H_
#define DLOCK_ADAPTERS_CLI_MONITOR_COMMAND_H_

#include <string>

#include "cli_common.h"

namespace dlock::cli {

struct MonitorFlags {
  std::string prefix;
  std::string interval = "10s";
  std::string held_longer_than;  // empty: no held-too-long reports
  std::string on_held_too_long;  // a shell command, run with sh -c
  std::string hook_timeout = "30s";
  bool unlock_dead = false;
  std::string metrics_listen;  // host:port; empty: no metrics server
};

void AddMonitorFlags(CLI::App& command, MonitorFlags& flags);

int MonitorCommand(const BackendFlags& backend, const MonitorFlags& flags);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_MONITOR_COMMAND_H_
