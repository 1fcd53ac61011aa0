// Copyright dlock authors. `dlock top`: the locks of a namespace as a live,
// sortable table in the terminal.
#ifndef DLOCK_ADAPTERS_CLI_TOP_COMMAND_H_
#define DLOCK_ADAPTERS_CLI_TOP_COMMAND_H_

#include <string>

#include "cli_common.h"

namespace dlock::cli {

struct TopFlags {
  std::string prefix;
  std::string interval = "1s";
  std::string sort = "held-for";
  bool once = false;
};

void AddTopFlags(CLI::App& command, TopFlags& flags);

int TopCommand(const BackendFlags& backend, const TopFlags& flags);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_TOP_COMMAND_H_
