// Copyright dlock authors. What the subcommands of `dlock` share: exit codes,
// backend flags, and one-line errors.
#ifndef DLOCK_ADAPTERS_CLI_CLI_COMMON_H_
#define DLOCK_ADAPTERS_CLI_CLI_COMMON_H_

#include <initializer_list>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dlock/adapters/config.h"
#include "dlock/client.h"
#include "dlock/duration.h"
#include "nlohmann/json_fwd.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace dlock::cli {

// Documented in docs/cli.md; the tests check each one.
enum ExitCode : int {
  kOk = 0,
  kFailed = 1,        // another backend error (e.g. it cannot list)
  kUsage = 64,        // bad flag, argument, URI, duration, name or config
  kUnreachable = 69,  // the backend cannot be reached
  kInternal = 70,     // a system call failed (fork, pipe)
  kNotAcquired = 75,  // run: not had within --wait; a job: another runs it
  kLost = 76,         // run: the lock was lost while the command ran
  kRefused = 77,      // credentials, a right or a semaphore's N refused
  kAlreadyRan = 79,   // run (a job): the slot already ran (--at-least-for)
  kCannotExecute = 126,
  kCommandNotFound = 127,
};

// Flags every subcommand takes.
struct BackendFlags {
  std::string backend;
  std::string profile;
  std::string config;
  std::string lock_namespace;
  bool json = false;
};

// `json`: whether the command takes --json (run passes the command's output
// through untouched, so it has none).
void AddBackendFlags(CLI::App& command, BackendFlags& flags, bool json);

// How often top and monitor scan, and how long a hook may run.
inline constexpr DurationRange kIntervalRange{.min = absl::Milliseconds(10),
                                              .max = absl::Hours(1)};

// The value of duration flag `flag` (ParseDuration, dlock/duration.h);
// InvalidArgument naming the flag and, when out of `range`, the range.
absl::StatusOr<absl::Duration> DurationFlag(absl::string_view flag,
                                            absl::string_view text,
                                            DurationRange range);

// The exit code for a failed operation.
int ExitCodeFor(const absl::Status& status);

// Writes "dlock: <message>" as one line on stderr and returns `code`.
int Fail(int code, absl::string_view message);
int Fail(const absl::Status& status);

// Resolves the profile (flags, then the environment).
absl::StatusOr<Profile> ResolveProfile(const BackendFlags& flags);

// Says on stderr, once per process, that the profile's backend URI turns
// off the check of the server's TLS certificate (tls_insecure_skip_verify).
void WarnIfTlsUnchecked(const Profile& profile);

// Connects with the profile; the flags' namespace wins over the profile's.
// `options` as for ConnectProfile (an observer, say).
absl::StatusOr<std::unique_ptr<LockClient>> ConnectWith(
    Profile profile, const BackendFlags& flags, ClientOptions options = {});

// Connects as the flags say; on failure, prints the error and returns null
// with `exit_code` set.
std::unique_ptr<LockClient> ConnectOrFail(const BackendFlags& flags,
                                          int& exit_code,
                                          ClientOptions options = {});

// Blocks `signals` in the calling thread (and the threads it starts later:
// call it before connecting) and returns a signalfd that reads them, so
// that a loop can poll() for them with its other descriptors. -1 and
// errno when the kernel refuses.
int BlockedSignalFd(std::initializer_list<int> signals);

// Reads one signal from a BlockedSignalFd() descriptor; 0 when none is
// pending.
int ReadSignal(int signal_fd);

// JSON as the CLI prints it (nlohmann-json): one line, keys in the order
// they were set; bytes that are not UTF-8 become U+FFFD instead of throwing.
std::string DumpJson(const nlohmann::ordered_json& value);

// A JSON string literal (quotes included), for values in log lines.
std::string JsonString(absl::string_view text);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_CLI_COMMON_H_
