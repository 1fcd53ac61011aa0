// Copyright dlock authors. Throwaway servers for tests: each runs as a child
// process on a free loopback port in its own temporary directory, and is
// stopped (and the directory removed) when the object is destroyed.
#ifndef DLOCK_INTEGRATION_SERVER_PROCESS_H_
#define DLOCK_INTEGRATION_SERVER_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dlock::test {

// A port of 127.0.0.1 that can be bound now, below the kernel's ephemeral
// range (so no client connection takes it) and claimed for this process
// with a lock on a file in /tmp/dlock-test-ports (so no other test process
// picks it while this one lives; ctest runs several at once).
absl::StatusOr<int> FreeLoopbackPort();

// The first port of the kernel's range for the local ends of outgoing
// connections (/proc/sys/net/ipv4/ip_local_port_range).
int EphemeralPortLow();

// A fresh directory under `base`, or when it is empty under $TMPDIR (or
// /tmp), removed by RemoveTree().
absl::StatusOr<std::string> MakeTempDir(const std::string& prefix,
                                        const std::string& base = "");
void RemoveTree(const std::string& path);

// A fresh temporary directory owned by `user`, for a server that refuses to
// run as root (PostgreSQL, PgBouncer), with that user's ids.
// FailedPrecondition naming `debian_package` (which makes the user) when
// there is no such user.
struct UserDir {
  std::string path;
  uid_t uid = 0;
  gid_t gid = 0;
};
absl::StatusOr<UserDir> MakeTempDirFor(const std::string& user,
                                       const std::string& prefix,
                                       const std::string& debian_package);

// FailedPrecondition naming the Debian package to install when `path` is
// not an executable file.
absl::Status RequireExecutable(const std::string& path,
                               const std::string& debian_package);

// Runs argv (argv[0] a path) to its end with `input` on its standard input
// and `env` ("NAME=value", added to this process's environment), and
// returns what it printed (standard output and error). Secrets go in
// `input` or `env`, never in argv, which every user can read. Internal
// naming argv[0] and the end of its output when it exits non-zero;
// DeadlineExceeded when it runs past `timeout` (it is killed).
absl::StatusOr<std::string> RunCommand(
    const std::vector<std::string>& argv, const std::string& input = "",
    const std::vector<std::string>& env = {},
    absl::Duration timeout = absl::Seconds(30));

// True once a TCP connection to 127.0.0.1:port succeeds.
bool PortAccepts(int port);

// Sends `request` to 127.0.0.1:port and returns what comes back until the
// peer closes or `timeout` passes (ZooKeeper's four-letter words), or, when
// `complete` is set, as soon as it accepts what came so far (for servers
// that keep the connection open, such as Redis Sentinel, which has no QUIT).
absl::StatusOr<std::string> TcpExchange(
    int port, const std::string& request, absl::Duration timeout,
    const std::function<bool(const std::string&)>& complete = nullptr);

// TcpExchange() with the server listening on the unix socket `path`.
absl::StatusOr<std::string> UnixExchange(
    const std::string& path, const std::string& request, absl::Duration timeout,
    const std::function<bool(const std::string&)>& complete = nullptr);

// One child process. Output goes to `log_path`.
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // argv[0] is the program path. `run_as` is a user name to drop to before
  // exec (PostgreSQL refuses root), empty to stay. `own_session`: the child
  // gets a session of its own (setsid) whatever DLOCK_SERVERS_OWN_SESSION
  // says, as a daemon has (a group of servers that must keep their CPU
  // share under a loaded client, such as a Redis Cluster's nodes).
  absl::Status Spawn(const std::vector<std::string>& argv,
                     const std::string& log_path,
                     const std::string& run_as = "", bool own_session = false);
  bool Running();
  // SIGTERM, then SIGKILL after `grace`; waits for the exit.
  void Stop(absl::Duration grace = absl::Seconds(5));
  void Kill();    // SIGKILL and wait
  void Pause();   // SIGSTOP
  void Resume();  // SIGCONT
  pid_t pid() const { return pid_; }

 private:
  void Reap(bool block);
  pid_t pid_ = -1;
};

// Polls `ready` every 50ms until it is true or `timeout` passes; the error
// names `what` and, when set, the tail of `log_path`.
absl::Status WaitUntil(const std::function<bool()>& ready,
                       absl::Duration timeout, const std::string& what,
                       const std::string& log_path = "");

// The last `max_bytes` of a file, for error messages.
std::string FileTail(const std::string& path, size_t max_bytes = 2000);

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_SERVER_PROCESS_H_
