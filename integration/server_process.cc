#include "server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace dlock::test {

namespace {

// True when 127.0.0.1:port can be bound now.
bool Bindable(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok =
      bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// Claims `port` for the rest of this process's life: an exclusive flock on
// a file of a directory every test process on the machine shares, on a
// descriptor left open on purpose. The kernel drops the lock when the
// process ends, however it ends, so no claim outlives its claimer.
bool Claim(const std::string& dir, int port) {
  const std::string path = absl::StrCat(dir, "/", port);
  const int fd = open(path.c_str(), O_CREAT | O_RDONLY | O_CLOEXEC, 0666);
  if (fd < 0) return false;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);  // another process's, or another server's of this one
    return false;
  }
  return true;
}

}  // namespace

int EphemeralPortLow() {
  int low = 32768;
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  in >> low;
  return low;
}

absl::StatusOr<int> FreeLoopbackPort() {
  // Below the kernel's ephemeral range, so that no client connection of
  // any process holds it, and claimed, so that no other test process picks
  // it before the server it is for has bound it (ctest runs several at
  // once). Claims live in /tmp whatever TMPDIR says: they are machine-wide.
  const int ephemeral_low = EphemeralPortLow();
  const int low = 10000;
  const int high = std::min(ephemeral_low, 32768) - 1;
  const std::string dir = "/tmp/dlock-test-ports";
  mkdir(dir.c_str(), 01777);
  chmod(dir.c_str(), 01777);
  if (high - low < 1000) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the kernel's ephemeral ports start at ", ephemeral_low,
        " (/proc/sys/net/ipv4/ip_local_port_range), leaving too few below it "
        "for test servers; they take ports from ",
        low, " up"));
  }
  thread_local std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(low, high);
  for (int i = 0; i < 1000; ++i) {
    const int port = pick(random);
    if (Claim(dir, port) && Bindable(port)) return port;
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "no loopback port from ", low, " to ", high,
      " both free and unclaimed after 1000 tries (claims are files in ", dir,
      ")"));
}

absl::StatusOr<std::string> MakeTempDir(const std::string& prefix,
                                        const std::string& base) {
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string parent =
      !base.empty() ? base : (tmpdir != nullptr && *tmpdir ? tmpdir : "/tmp");
  std::string templ = absl::StrCat(parent, "/", prefix, "-XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("mkdtemp(", templ, "): ", std::strerror(errno)));
  }
  return templ;
}

absl::StatusOr<UserDir> MakeTempDirFor(const std::string& user,
                                       const std::string& prefix,
                                       const std::string& debian_package) {
  passwd* pw = getpwnam(user.c_str());
  if (pw == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("there is no user '", user,
                     "' to run the server as: install it with `apt-get "
                     "install -y ",
                     debian_package, "`"));
  }
  UserDir out{.path = "", .uid = pw->pw_uid, .gid = pw->pw_gid};
  absl::StatusOr<std::string> dir = MakeTempDir(prefix);
  if (!dir.ok()) return dir.status();
  out.path = *dir;
  if (chown(out.path.c_str(), out.uid, out.gid) != 0) {
    RemoveTree(out.path);
    return absl::InternalError(absl::StrCat("cannot chown ", out.path));
  }
  return out;
}

void RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

absl::Status RequireExecutable(const std::string& path,
                               const std::string& debian_package) {
  if (access(path.c_str(), X_OK) == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(path, " is missing: install it with `apt-get install -y ",
                   debian_package, "` (scripts/test.sh does this)"));
}

namespace {

// Writes `input` to `in_fd` and reads `out_fd` to its end, or until
// `deadline`; false when the deadline came first.
bool Exchange(int in_fd, int out_fd, const std::string& input,
              std::string& output, absl::Time deadline) {
  size_t written = 0;
  if (input.empty()) {
    close(in_fd);
    in_fd = -1;
  }
  char buf[4096];
  while (true) {
    pollfd fds[2] = {{out_fd, POLLIN, 0}, {in_fd, POLLOUT, 0}};
    const int ms =
        static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (ms <= 0 || poll(fds, in_fd >= 0 ? 2 : 1, ms) <= 0) break;
    if (in_fd >= 0 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n =
          write(in_fd, input.data() + written, input.size() - written);
      if (n > 0) written += n;
      if (n <= 0 || written == input.size()) {
        close(in_fd);
        in_fd = -1;
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = read(out_fd, buf, sizeof(buf));
      if (n <= 0) {
        if (in_fd >= 0) close(in_fd);
        return true;
      }
      output.append(buf, n);
    }
  }
  if (in_fd >= 0) close(in_fd);
  return false;
}

}  // namespace

absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv,
                                       const std::string& input,
                                       const std::vector<std::string>& env,
                                       absl::Duration timeout) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.data()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.data()));
  envp.push_back(nullptr);
  int in[2];
  int out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return absl::InternalError("pipe() failed");
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return absl::InternalError("pipe() failed");
  }
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  if (pid < 0) {
    close(in[1]);
    close(out[0]);
    return absl::InternalError("fork() failed");
  }
  signal(SIGPIPE, SIG_IGN);  // a child that exits before reading its input
  std::string output;
  const bool ended =
      Exchange(in[1], out[0], input, output, absl::Now() + timeout);
  close(out[0]);
  if (!ended) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!ended) {
    return absl::DeadlineExceededError(absl::StrCat(
        argv[0], " did not finish within ", absl::FormatDuration(timeout)));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(
        argv[0], " ", argv.size() > 1 ? argv[1] : "", " failed: ",
        output.size() > 2000 ? output.substr(output.size() - 2000) : output));
  }
  return output;
}

bool PortAccepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

namespace {

// Sends `request` on the connected socket `fd` (closed here) and returns
// what comes back, as TcpExchange() says.
absl::StatusOr<std::string> Exchange(
    int fd, const std::string& request, absl::Duration timeout,
    const std::function<bool(const std::string&)>& complete) {
  if (write(fd, request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("write failed");
  }
  std::string reply;
  const absl::Time deadline = absl::Now() + timeout;
  char buf[4096];
  while (absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    int ms =
        static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (poll(&p, 1, ms > 0 ? ms : 1) <= 0) break;
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    reply.append(buf, n);
    if (complete && complete(reply)) break;
  }
  close(fd);
  return reply;
}

}  // namespace

absl::StatusOr<std::string> TcpExchange(
    int port, const std::string& request, absl::Duration timeout,
    const std::function<bool(const std::string&)>& complete) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("nothing listens on port ", port));
  }
  return Exchange(fd, request, timeout, complete);
}

absl::StatusOr<std::string> UnixExchange(
    const std::string& path, const std::string& request, absl::Duration timeout,
    const std::function<bool(const std::string&)>& complete) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unix socket path too long: ", path));
  }
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("nothing listens on ", path));
  }
  return Exchange(fd, request, timeout, complete);
}

ChildProcess::~ChildProcess() { Stop(); }

absl::Status ChildProcess::Spawn(const std::vector<std::string>& argv,
                                 const std::string& log_path,
                                 const std::string& run_as, bool own_session) {
  uid_t uid = 0;
  gid_t gid = 0;
  if (!run_as.empty()) {
    passwd* pw = getpwnam(run_as.c_str());
    if (pw == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("no user '", run_as, "' to run ", argv[0], " as"));
    }
    uid = pw->pw_uid;
    gid = pw->pw_gid;
  }
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (log_fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", log_path));
  }
  if (!run_as.empty() && fchown(log_fd, uid, gid) != 0) {
    close(log_fd);
    return absl::InternalError(absl::StrCat("cannot chown ", log_path));
  }
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Benchmarks ask for servers in sessions of their own (below).
  own_session =
      own_session || std::getenv("DLOCK_SERVERS_OWN_SESSION") != nullptr;
  pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return absl::InternalError("fork() failed");
  }
  if (pid == 0) {
    // Own process group, so that a server's own children are stopped too.
    // Benchmarks (DLOCK_SERVERS_OWN_SESSION) want an own session, hence
    // own scheduler autogroup, as a daemon has: in the test's autogroup a
    // server shares one CPU share with every client thread, and 64 busy
    // client threads starve it (Redis served 30% fewer pairs to a
    // 16-thread client). The fault tests keep the group: two ZooKeeper
    // fault tests failed under load in the first CI runs with sessions.
    if (own_session) {
      setsid();
    } else {
      setpgid(0, 0);
    }
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    if (!run_as.empty()) {
      if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) {
        _exit(126);
      }
    }
    // A server dies with the test that started it, even a killed one (set
    // after setuid, which clears it).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    execv(args[0], args.data());
    _exit(127);
  }
  close(log_fd);
  pid_ = pid;
  return absl::OkStatus();
}

void ChildProcess::Reap(bool block) {
  if (pid_ <= 0) return;
  int status = 0;
  pid_t r = waitpid(pid_, &status, block ? 0 : WNOHANG);
  if (r == pid_ || (r < 0 && errno == ECHILD)) pid_ = -1;
}

bool ChildProcess::Running() {
  Reap(false);
  return pid_ > 0;
}

void ChildProcess::Stop(absl::Duration grace) {
  if (!Running()) return;
  kill(-pid_, SIGCONT);
  kill(-pid_, SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  while (Running() && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (Running()) Kill();
}

void ChildProcess::Kill() {
  if (pid_ <= 0) return;
  kill(-pid_, SIGKILL);
  Reap(true);
}

void ChildProcess::Pause() {
  if (pid_ > 0) kill(-pid_, SIGSTOP);
}

void ChildProcess::Resume() {
  if (pid_ > 0) kill(-pid_, SIGCONT);
}

absl::Status WaitUntil(const std::function<bool()>& ready,
                       absl::Duration timeout, const std::string& what,
                       const std::string& log_path) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (ready()) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string msg = absl::StrCat(what, " did not happen within ",
                                 absl::FormatDuration(timeout));
  if (!log_path.empty()) {
    absl::StrAppend(&msg, "; end of ", log_path, ":\n", FileTail(log_path));
  }
  return absl::DeadlineExceededError(msg);
}

std::string FileTail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  return all.size() > max_bytes ? all.substr(all.size() - max_bytes) : all;
}

}  // namespace dlock::test
