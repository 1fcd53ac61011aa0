// Copyright dlock authors. Helpers for the adapter tests: running the
// `dlock` binary and helper processes, temporary directories.
#ifndef DLOCK_ADAPTERS_TESTS_TEST_UTIL_H_
#define DLOCK_ADAPTERS_TESTS_TEST_UTIL_H_

#include <sys/types.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace dlock::test {

inline constexpr char kCliPath[] = DLOCK_CLI_PATH;
inline constexpr char kJobRunnerPath[] = DLOCK_JOB_RUNNER_PATH;
inline constexpr char kSourceDir[] = DLOCK_SOURCE_DIR;

std::string ReadFileOrEmpty(const std::string& path);
void WriteFile(const std::string& path, const std::string& content);

// A process with its stdout and stderr in files. Killed (SIGKILL) and
// reaped on destruction if still running.
class Process {
 public:
  // `env` entries ("K=V") are added to this process's environment.
  Process(const std::vector<std::string>& argv,
          const std::vector<std::string>& env = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // The exit code (128+N for signal N), or -1 if still running at `timeout`.
  int Wait(absl::Duration timeout = absl::Seconds(60));
  void Signal(int sig);
  pid_t pid() const { return pid_; }
  std::string out() const { return ReadFileOrEmpty(out_path_); }
  std::string err() const { return ReadFileOrEmpty(err_path_); }

 private:
  pid_t pid_ = -1;
  int code_ = -1;
  std::string dir_;
  std::string out_path_;
  std::string err_path_;
};

struct Result {
  int code;
  std::string out;
  std::string err;
};

// Runs to completion (or SIGKILL at `timeout`, giving code -1).
Result RunProcess(const std::vector<std::string>& argv,
                  const std::vector<std::string>& env = {},
                  absl::Duration timeout = absl::Seconds(60));

// Runs `script` with bash -euo pipefail.
Result RunShell(const std::string& script,
                const std::vector<std::string>& env = {},
                absl::Duration timeout = absl::Seconds(120));

// The argv of the dlock CLI run with `args`: this build's, or the binary
// $DLOCK_TEST_CLI names (to see a new test fail against an older build).
inline std::vector<std::string> Dlock(std::vector<std::string> args) {
  const char* other = std::getenv("DLOCK_TEST_CLI");
  args.insert(args.begin(), other != nullptr && *other ? other : kCliPath);
  return args;
}

// stderr of a failing command is exactly one line, starting "dlock: ".
inline void ExpectOneLine(const Result& r) {
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.err, "dlock: ")) << r.err;
}

}  // namespace dlock::test

#endif  // DLOCK_ADAPTERS_TESTS_TEST_UTIL_H_
