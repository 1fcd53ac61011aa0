// Copyright dlock authors. What `dlock run` and `dlock elect` can hold while
// their command runs: a lock (the writer), a read lock (--shared), permits
// of a semaphore (--permits), several locks at once (--all), a leadership
// (elect). Each mode says what it takes, how it is told lost, how it is
// given back, and what the command sees; the loop around it (wait, signals,
// the child, the exit codes) is run_command.cc's, the same for all.
#ifndef DLOCK_ADAPTERS_CLI_RUN_MODES_H_
#define DLOCK_ADAPTERS_CLI_RUN_MODES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "child_process.h"
#include "dlock/client.h"

namespace dlock::cli {

// A grant the command runs under.
struct Held {
  std::function<bool()> lost;             // told lost (C20)
  std::function<absl::Status()> release;  // FailedPrecondition: was lost
  std::vector<EnvVar> env;                // what the command sees
};

// One mode, for one client.
struct RunTarget {
  // Takes it, waiting up to options.wait (DeadlineExceeded past it).
  std::function<absl::StatusOr<Held>(const AcquireOptions&)> acquire;
  // Why it is not free now, for messages: "held by X (fencing token 7)".
  std::function<std::string()> busy;
};

// A mode before a client exists: its description for messages ("lock
// 'x'", "semaphore 'x'") and how to make its target.
struct RunMode {
  std::string what;
  std::function<absl::StatusOr<RunTarget>(LockClient&)> target;
};

RunMode LockMode(const std::string& name);
RunMode ReadMode(const std::string& name);
RunMode PermitMode(const std::string& name, int64_t permits, int64_t take);
RunMode AllMode(const std::vector<std::string>& names);
RunMode LeaderMode(const std::string& name, const std::string& value);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_RUN_MODES_H_
