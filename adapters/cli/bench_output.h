// Copyright dlock authors. What `dlock bench` reports of each measurement:
// a JSON record (nlohmann-json) and a line of the table.
#ifndef DLOCK_ADAPTERS_CLI_BENCH_OUTPUT_H_
#define DLOCK_ADAPTERS_CLI_BENCH_OUTPUT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bench_command.h"
#include "bench_scenarios.h"
#include "dlock/adapters/config.h"
#include "nlohmann/json.hpp"

namespace dlock::cli {

using Json = nlohmann::ordered_json;

// The flags, checked and parsed.
struct BenchPlan {
  std::vector<Profile> profiles;
  std::vector<std::string> scenarios;  // in the order given
  std::vector<int> threads;
  bench::Settings settings;  // without its connector
  absl::Duration lease;
};

// One backend's results: JSON records (the backend's fields first) and
// lines of the table.
struct Report {
  Json head;
  std::vector<Json> records;
  std::vector<std::string> lines;
  bool contention = false;  // the table then explains Jain's index
};

// Told before each measurement: what runs, and how long it may take.
using Progress = std::function<void(const std::string&, absl::Duration)>;

// After a table with a contention line: what Jain's index says.
inline constexpr char kJainLegend[] =
    "Jain's fairness index of the acquisitions per client: 1 when every "
    "client got the lock as often, 1/N when one client got it every time.\n";

// Runs `scenario` ("uncontended", "contention", "watchdog", "memory",
// "semaphore", "shared", "exclusive", "election") and
// adds its records and lines to `report`.
absl::Status RunScenario(const std::string& scenario, const BenchPlan& plan,
                         const BenchFlags& flags,
                         const bench::Settings& settings, Report& report,
                         const Progress& progress);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_BENCH_OUTPUT_H_
