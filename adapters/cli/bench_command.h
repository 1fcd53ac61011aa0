// Copyright dlock authors. `dlock bench`: the figures to choose a backend by,
// measured on the user's own servers (docs/cli.md).
#ifndef DLOCK_ADAPTERS_CLI_BENCH_COMMAND_H_
#define DLOCK_ADAPTERS_CLI_BENCH_COMMAND_H_

#include <string>
#include <vector>

#include "cli_common.h"

namespace dlock::cli {

struct BenchFlags {
  std::vector<std::string> backends;  // --backend, any number
  std::vector<std::string> profiles;  // --profile, any number
  std::string config;
  // Empty: "dlock-bench"; a URI's own namespace= wins over it.
  std::string lock_namespace;
  bool json = false;
  bool quiet = false;
  std::string scenarios = "uncontended,contention,watchdog,memory";
  std::string threads = "1,16,64";
  std::string duration = "2s";
  std::string warmup = "200ms";
  int clients = 8;
  int locks = 1000;
  int names = 10000;
  std::string lease = "3s";
  // Semaphore: its N; 0, as many as the threads of each run.
  int permits = 0;
  int handovers = 20;  // election: resign hand-overs measured
  int lapses = 3;      // election: lease-lapse hand-overs measured
  // --quick: a first look in a few seconds per backend; the settings not
  // given on the command line take kQuick's values.
  bool quick = false;
  std::vector<std::string> given;  // the settings' flags given, "--locks"
};

// Adds the subcommand's flags to `command`.
void AddBenchFlags(CLI::App& command, BenchFlags& flags);

int BenchCommand(const BenchFlags& given);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_BENCH_COMMAND_H_
