#include "child_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli_common.h"

extern char** environ;

namespace dlock::cli {

// Resolved before forking, so that the child only calls async-signal-safe
// functions.
absl::StatusOr<std::string> ResolveCommand(const std::string& command) {
  auto executable = [](const std::string& path) -> absl::Status {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat("command not found: ", path));
    }
    if (S_ISDIR(st.st_mode) || access(path.c_str(), X_OK) != 0) {
      return absl::PermissionDeniedError(
          absl::StrCat("command is not executable: ", path));
    }
    return absl::OkStatus();
  };
  if (command.find('/') != std::string::npos) {
    if (absl::Status s = executable(command); !s.ok()) return s;
    return command;
  }
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "/usr/bin:/bin";
  absl::Status first_problem =
      absl::NotFoundError(absl::StrCat("command not found: ", command));
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    const std::string candidate =
        absl::StrCat(dir.empty() ? "." : dir, "/", command);
    absl::Status s = executable(candidate);
    if (s.ok()) return candidate;
    if (s.code() == absl::StatusCode::kPermissionDenied) first_problem = s;
  }
  return first_problem;
}

std::vector<std::string> SecretVariables(
    const Profile& profile, const std::vector<std::string>& passed) {
  std::vector<std::string> names;
  for (const std::string& name :
       {std::string(kBackendEnv), profile.password_env}) {
    if (!name.empty() && !absl::c_linear_search(passed, name)) {
      names.push_back(name);
    }
  }
  return names;
}

// The environment of the command: ours, less what is withheld, plus the
// lock's name and token.
namespace {

// What any mode of `dlock run` or `dlock elect` may set (docs/cli.md).
constexpr absl::string_view kDlockVariables[] = {
    "DLOCK_LOCK_NAME",   "DLOCK_FENCING_TOKEN",  "DLOCK_PERMIT_SLOTS",
    "DLOCK_LOCK_NAMES",  "DLOCK_FENCING_TOKENS", "DLOCK_ELECTION",
    "DLOCK_LEADER_TERM", "DLOCK_LEADER_VALUE",   "DLOCK_JOB_SLOT"};

}  // namespace

std::vector<std::string> ChildEnvironment(
    const std::vector<EnvVar>& set, const std::vector<std::string>& withheld) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const absl::string_view entry(*e);
    const absl::string_view variable = entry.substr(0, entry.find('='));
    if (absl::c_linear_search(kDlockVariables, variable) ||
        absl::c_linear_search(withheld, variable)) {
      continue;
    }
    env.emplace_back(entry);
  }
  for (const EnvVar& var : set) {
    env.push_back(absl::StrCat(var.name, "=", var.value));
  }
  return env;
}

std::vector<std::string> ChildEnvironment(
    const std::string& name, uint64_t token,
    const std::vector<std::string>& withheld) {
  return ChildEnvironment(
      {{"DLOCK_FENCING_TOKEN", absl::StrCat(token)}, {"DLOCK_LOCK_NAME", name}},
      withheld);
}

namespace {

// Closes every descriptor above stderr except `keep`, so that the command
// inherits neither the client's sockets and pipes (hiredis and the
// ZooKeeper client do not set close-on-exec) nor what dlock inherited.
// Runs between fork and exec: async-signal-safe calls only.
void CloseInheritedDescriptors(int keep) {
  if (keep > 3 && close_range(3, keep - 1, 0) != 0) {
    for (int fd = 3; fd < keep; ++fd) close(fd);
  }
  closefrom(std::max(keep + 1, 3));
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

Spawned Spawn(const std::string& path, std::vector<std::string> argv,
              std::vector<std::string> env, int death_signal) {
  std::vector<char*> c_argv = CStrings(argv);
  std::vector<char*> c_env = CStrings(env);
  // exec() failures come back through a close-on-exec pipe, which the child
  // keeps open when it closes what it inherited.
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    return {.exit_code =
                Fail(kInternal, absl::StrCat("pipe: ", strerror(errno)))};
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(report[0]);
    close(report[1]);
    return {.exit_code =
                Fail(kInternal, absl::StrCat("fork: ", strerror(errno)))};
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here on.
    setpgid(0, 0);
    // If dlock dies (even by SIGKILL), the command is told as on a loss.
    prctl(PR_SET_PDEATHSIG, death_signal);
    if (getppid() != parent) _exit(kInternal);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    CloseInheritedDescriptors(report[1]);
    execve(path.c_str(), c_argv.data(), c_env.data());
    const int error = errno;
    ssize_t ignored = write(report[1], &error, sizeof(error));
    (void)ignored;
    _exit(error == ENOENT ? kCommandNotFound : kCannotExecute);
  }
  close(report[1]);
  // Also in the parent, so that signalling the group cannot race the child.
  setpgid(pid, pid);
  int error = 0;
  ssize_t n;
  do {
    n = read(report[0], &error, sizeof(error));
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == sizeof(error)) {
    int status;
    waitpid(pid, &status, 0);
    return {.exit_code =
                Fail(error == ENOENT ? kCommandNotFound : kCannotExecute,
                     absl::StrCat("cannot run ", path, ": ", strerror(error)))};
  }
  return {.pid = pid};
}

int ExitCodeOfChild(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kInternal;
}

}  // namespace dlock::cli
