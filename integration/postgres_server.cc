#include "postgres_server.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proc_state.h"

namespace dlock::test {
namespace {

constexpr char kBinDir[] = "/usr/lib/postgresql/15/bin";
constexpr char kUser[] = "postgres";
constexpr char kInstall[] = "postgresql";

// chown -R: initdb and the server write only where `postgres` owns.
absl::Status ChownTree(const std::string& path, uid_t uid, gid_t gid) {
  std::error_code ec;
  if (chown(path.c_str(), uid, gid) != 0) {
    return absl::InternalError(absl::StrCat("cannot chown ", path));
  }
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(path, ec)) {
    if (chown(entry.path().c_str(), uid, gid) != 0) {
      return absl::InternalError(
          absl::StrCat("cannot chown ", entry.path().string()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start() {
  return Start(Options{});
}

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Prepare(
    Options options) {
  for (const char* tool : {"initdb", "postgres", "pg_basebackup"}) {
    if (absl::Status s =
            RequireExecutable(absl::StrCat(kBinDir, "/", tool), kInstall);
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<UserDir> dir = MakeTempDirFor(kUser, "dlock-pg", kInstall);
  if (!dir.ok()) return dir.status();
  std::unique_ptr<PostgresServer> server(new PostgresServer);
  server->options_ = std::move(options);
  server->dir_ = dir->path;
  server->data_dir_ = dir->path + "/data";
  server->uid_ = dir->uid;
  server->gid_ = dir->gid;
  absl::StatusOr<int> port = FreeLoopbackPort();
  if (!port.ok()) return port.status();
  server->port_ = *port;
  return server;
}

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start(
    Options options) {
  absl::StatusOr<std::unique_ptr<PostgresServer>> server =
      Prepare(std::move(options));
  if (!server.ok()) return server.status();
  if (absl::Status s = (*server)->InitDb(); !s.ok()) return s;
  if (absl::Status s = (*server)->InstallHbaAndCertificates(); !s.ok()) {
    return s;
  }
  if (absl::Status s = (*server)->StartServer(); !s.ok()) return s;
  return server;
}

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::StartStandby(
    const PostgresServer& primary, const std::string& slot, int via_port) {
  absl::StatusOr<std::unique_ptr<PostgresServer>> server =
      Prepare(primary.options_);
  if (!server.ok()) return server.status();
  if (absl::Status s = (*server)->BaseBackup(primary, slot, via_port);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = (*server)->StartServer(); !s.ok()) return s;
  return server;
}

absl::Status PostgresServer::RebuildAsStandbyOf(const PostgresServer& primary,
                                                const std::string& slot,
                                                int via_port) {
  Kill();
  if (absl::Status s = BaseBackup(primary, slot, via_port); !s.ok()) return s;
  return StartServer();
}

absl::Status PostgresServer::BaseBackup(const PostgresServer& primary,
                                        const std::string& slot, int via_port) {
  RemoveTree(data_dir_);
  // A slot left by an earlier standby of the same name would refuse -C.
  if (absl::Status s = primary
                           .Psql(absl::StrCat(
                               "SELECT pg_drop_replication_slot(slot_name) "
                               "FROM pg_replication_slots WHERE slot_name = '",
                               slot, "';"))
                           .status();
      !s.ok()) {
    return s;
  }
  // As root (only the server refuses it); the tree is chowned below.
  if (absl::Status s =
          RunCommand(
              {absl::StrCat(kBinDir, "/pg_basebackup"), "-h", "127.0.0.1", "-p",
               absl::StrCat(primary.port()), "-U", kUser, "-D", data_dir_, "-X",
               "stream", "-S", slot, "-C", "-c", "fast", "--no-sync"},
              "", {}, absl::Seconds(120))
              .status();
      !s.ok()) {
    return s;
  }
  // Later lines of postgresql.auto.conf win. A standby that is promoted
  // must not wait for a synchronous standby of its own, whatever its
  // primary's settings were.
  std::ofstream conf(data_dir_ + "/postgresql.auto.conf", std::ios::app);
  conf << "primary_conninfo = 'host=127.0.0.1 port="
       << (via_port != 0 ? via_port : primary.port())
       << " user=postgres application_name=" << slot << "'\n"
       << "primary_slot_name = '" << slot << "'\n"
       << "synchronous_standby_names = ''\n";
  std::ofstream signal(data_dir_ + "/standby.signal");
  if (!conf || !signal) {
    return absl::InternalError("cannot write the standby's configuration in " +
                               data_dir_);
  }
  conf.close();
  signal.close();
  return ChownTree(data_dir_, uid_, gid_);
}

absl::Status PostgresServer::Promote() {
  absl::StatusOr<std::string> promoted = Psql("SELECT pg_promote(true, 60);");
  if (!promoted.ok()) return promoted.status();
  if (*promoted != "t") {
    return absl::InternalError(
        absl::StrCat("pg_promote() answered '", *promoted, "'"));
  }
  return absl::OkStatus();
}

absl::Status PostgresServer::InitDb() {
  const std::string log = dir_ + "/initdb.log";
  ChildProcess initdb;
  if (absl::Status s = initdb.Spawn(
          {absl::StrCat(kBinDir, "/initdb"), "-D", data_dir_, "-U", kUser,
           "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"},
          log, kUser);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = WaitUntil([&] { return !initdb.Running(); },
                                 absl::Seconds(120), "initdb finishing", log);
      !s.ok()) {
    return s;
  }
  if (!std::filesystem::exists(data_dir_ + "/PG_VERSION")) {
    return absl::InternalError(
        absl::StrCat("initdb failed; end of ", log, ":\n", FileTail(log)));
  }
  return absl::OkStatus();
}

absl::Status PostgresServer::InstallHbaAndCertificates() {
  if (!options_.hba.empty()) {
    const std::string path = data_dir_ + "/pg_hba.conf";
    const std::string initdb_lines = FileTail(path, 1 << 20);
    std::ofstream hba(path, std::ios::trunc);
    for (const std::string& line : options_.hba) hba << line << "\n";
    hba << initdb_lines;
    if (!hba) return absl::InternalError("cannot write " + path);
  }
  if (!options_.ssl_cert_file.empty()) {
    // The key must be the server user's and unreadable to others.
    std::error_code ec;
    std::vector<std::pair<std::string, std::string>> files = {
        {options_.ssl_cert_file, "server.crt"},
        {options_.ssl_key_file, "server.key"}};
    if (!options_.ssl_ca_file.empty()) {
      files.push_back({options_.ssl_ca_file, "root.crt"});
      options_.settings.push_back("ssl_ca_file=root.crt");
    }
    for (const auto& [from, to] : files) {
      const std::string target = absl::StrCat(data_dir_, "/", to);
      std::filesystem::copy_file(
          from, target, std::filesystem::copy_options::overwrite_existing, ec);
      if (ec || chown(target.c_str(), uid_, gid_) != 0 ||
          chmod(target.c_str(), 0600) != 0) {
        return absl::InternalError(
            absl::StrCat("cannot install ", from, " as ", target));
      }
    }
    options_.settings.push_back("ssl=on");
  }
  return absl::OkStatus();
}

PostgresServer::~PostgresServer() {
  StopServer();
  RemoveTree(dir_);
}

std::string PostgresServer::Uri(const std::string& ns,
                                const std::string& extra) const {
  return UriAt(port_, ns, extra);
}

std::string PostgresServer::UriAt(int port, const std::string& ns,
                                  const std::string& extra) const {
  std::string uri =
      absl::StrCat("postgres://postgres@127.0.0.1:", port, "/postgres");
  const char* sep = "?";
  if (!ns.empty()) {
    absl::StrAppend(&uri, sep, "namespace=", ns);
    sep = "&";
  }
  if (!extra.empty()) absl::StrAppend(&uri, sep, extra);
  return uri;
}

absl::StatusOr<std::string> PostgresServer::Psql(const std::string& sql) const {
  static std::atomic<int> runs{0};
  const std::string base = absl::StrCat(dir_, "/psql-", ++runs);
  {
    std::ofstream script(base + ".sql");
    script << sql << "\n";
    if (!script) return absl::InternalError("cannot write " + base + ".sql");
  }
  ChildProcess psql;
  if (absl::Status s =
          psql.Spawn({absl::StrCat(kBinDir, "/psql"), "-X", "-q", "-At", "-v",
                      "ON_ERROR_STOP=1", "-h", dir_, "-p", absl::StrCat(port_),
                      "-U", kUser, "-d", "postgres", "-f", base + ".sql"},
                     base + ".out", kUser);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = WaitUntil([&] { return !psql.Running(); },
                                 absl::Seconds(60), "psql finishing");
      !s.ok()) {
    return s;
  }
  std::string out = FileTail(base + ".out", 1 << 20);
  // psql reports errors as "psql:<file>:<line>: ERROR: ..." on stderr,
  // which the log shares with the rows.
  if (absl::StrContains(out, "ERROR:") || absl::StrContains(out, "FATAL:") ||
      absl::StrContains(out, "psql:")) {
    return absl::InternalError(absl::StrCat("psql failed: ", out));
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) {
    out.pop_back();
  }
  return out;
}

absl::StatusOr<int> PostgresServer::TerminateBackends(
    const std::string& application_name) const {
  // Dollar quoting: a test's application name carries no "$t$".
  absl::StatusOr<std::string> out = Psql(absl::StrCat(
      "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
      "WHERE application_name = $t$",
      application_name, "$t$;"));
  if (!out.ok()) return out.status();
  int n = 0;
  if (!absl::SimpleAtoi(*out, &n)) {
    return absl::InternalError(absl::StrCat("psql printed '", *out, "'"));
  }
  return n;
}

absl::Status PostgresServer::StartServer() {
  const std::string log = absl::StrCat(dir_, "/postgres-", ++starts_, ".log");
  std::vector<std::string> argv = {
      absl::StrCat(kBinDir, "/postgres"),
      "-D",
      data_dir_,
      "-p",
      absl::StrCat(port_),
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      absl::StrCat("unix_socket_directories=", dir_),
      "-c",
      "fsync=off",
      "-c",
      "full_page_writes=off",
      "-c",
      "max_connections=400",
      "-c",
      "shared_buffers=32MB"};
  for (const std::string& setting : options_.settings) {
    argv.push_back("-c");
    argv.push_back(setting);
  }
  if (absl::Status s = process_.Spawn(argv, log, kUser); !s.ok()) return s;
  // "ready to accept connections", or "read-only connections" (a standby).
  return WaitUntil(
      [&] {
        return absl::StrContains(FileTail(log, 100000), "ready to accept ") &&
               PortAccepts(port_);
      },
      absl::Seconds(60), absl::StrCat("postgres listening on port ", port_),
      log);
}

void PostgresServer::StopServer() {
  if (!process_.Running()) return;
  // SIGINT is the fast shutdown: SIGTERM would wait for every client.
  kill(process_.pid(), SIGINT);
  WaitUntil([&] { return !process_.Running(); }, absl::Seconds(30),
            "postgres stopping")
      .IgnoreError();
  process_.Stop();
}

namespace {

// Whether `pid` exists and is not a zombie.
bool IsRunning(pid_t pid) {
  const char state = ProcessState(pid);
  return state != 0 && state != 'Z';
}

}  // namespace

void PostgresServer::Kill() {
  // Stopped first, the postmaster forks no child after the scan of its
  // children below: one it forked meanwhile would survive, keep the shared
  // memory attached, and the next start would refuse to run.
  if (process_.pid() > 0) kill(process_.pid(), SIGSTOP);
  const std::vector<pid_t> children = SignalAll(SIGKILL);
  process_.Kill();  // reaps the postmaster
  // Killed children detach from the shared memory as they die (a zombie
  // holds none); wait for that too.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  for (pid_t child : children) {
    while (IsRunning(child) && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
}

std::vector<pid_t> PostgresServer::SignalAll(int signal) {
  std::vector<pid_t> signalled;
  const pid_t postmaster = process_.pid();
  if (postmaster <= 0) return signalled;
  if (signal == SIGCONT) kill(postmaster, signal);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string dir = entry.path().filename().string();
    if (dir.empty() ||
        dir.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    // /proc/<pid>/stat: "pid (comm) state ppid ...", comm without ')'.
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)),
                     std::istreambuf_iterator<char>());
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 1));
    std::string state;
    pid_t pid = 0, ppid = 0;
    rest >> state >> ppid;
    if (ppid != postmaster) continue;
    pid = static_cast<pid_t>(std::atoi(dir.c_str()));
    if (pid > 0 && kill(pid, signal) == 0) signalled.push_back(pid);
  }
  if (signal != SIGCONT) kill(postmaster, signal);
  return signalled;
}

absl::Status PostgresServer::Restart() {
  StopServer();
  return StartServer();
}

}  // namespace dlock::test
