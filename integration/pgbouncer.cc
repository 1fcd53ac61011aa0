#include "pgbouncer.h"

#include <unistd.h>

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dlock::test {
namespace {

constexpr char kBinary[] = "/usr/sbin/pgbouncer";
constexpr char kUser[] = "postgres";

}  // namespace

absl::StatusOr<std::unique_ptr<PgBouncer>> PgBouncer::Start(Options options) {
  if (absl::Status s = RequireExecutable(kBinary, "pgbouncer"); !s.ok()) {
    return s;
  }
  absl::StatusOr<UserDir> dir =
      MakeTempDirFor(kUser, "dlock-pgbouncer", "postgresql");
  if (!dir.ok()) return dir.status();
  std::unique_ptr<PgBouncer> bouncer(new PgBouncer);
  bouncer->dir_ = dir->path;
  bouncer->users_ = options.users;
  bouncer->session_alias_ = options.session_alias;
  absl::StatusOr<int> port = FreeLoopbackPort();
  if (!port.ok()) return port.status();
  bouncer->port_ = *port;
  const std::string ini = bouncer->dir_ + "/pgbouncer.ini";
  const std::string users = bouncer->dir_ + "/users.txt";
  const std::string log = bouncer->dir_ + "/pgbouncer.log";
  {
    std::ofstream out(ini);
    // server_login_retry: after a failed server login PgBouncer refuses
    // clients this long before it tries again (15 s by default), which
    // would outlast a test's server restart.
    out << "[databases]\n* = host=127.0.0.1 port=" << options.server_port
        << "\n";
    if (!options.session_alias.empty()) {
      out << options.session_alias
          << " = host=127.0.0.1 port=" << options.server_port
          << " dbname=postgres pool_mode=session\n";
    }
    out << "[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = "
        << bouncer->port_ << "\nunix_socket_dir =\nauth_type = trust\n"
        << "auth_file = " << users << "\npool_mode = " << options.pool_mode
        << "\ndefault_pool_size = " << options.pool_size
        << "\nmax_client_conn = 500\nserver_login_retry = 0.1\n"
        << "logfile = " << log << "\n";
    std::ofstream list(users);
    for (const std::string& user : options.users) {
      list << "\"" << user << "\" \"\"\n";
    }
    if (!out || !list) {
      return absl::InternalError("cannot write " + ini + " or " + users);
    }
  }
  for (const std::string& path : {ini, users}) {
    if (chown(path.c_str(), dir->uid, dir->gid) != 0) {
      return absl::InternalError("cannot chown " + path);
    }
  }
  const std::string console = bouncer->dir_ + "/console.log";
  if (absl::Status s = bouncer->process_.Spawn({kBinary, ini}, console, kUser);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = WaitUntil(
          [&] {
            return absl::StrContains(FileTail(log, 100000), "process up") &&
                   PortAccepts(bouncer->port_);
          },
          absl::Seconds(30),
          absl::StrCat("pgbouncer listening on port ", bouncer->port_), log);
      !s.ok()) {
    return s;
  }
  return bouncer;
}

absl::Status PgBouncer::WaitServing(absl::Duration timeout) {
  // Each user has a pool of its own per database, whose server logins fail
  // and are retried apart from the others' after a restart: the session
  // alias's too (a client's LISTEN connection, refused once in CI with
  // "server login has been failing" after the other pools served).
  std::vector<std::string> databases = {"postgres"};
  if (!session_alias_.empty()) databases.push_back(session_alias_);
  for (const std::string& user : users_) {
    for (const std::string& db : databases) {
      absl::Status last;
      absl::Status waited = WaitUntil(
          [&] {
            last = QueryAs(user, "SELECT 1", db).status();
            return last.ok();
          },
          timeout,
          absl::StrCat("a login of ", user, " to ", db,
                       " through pgbouncer on port ", port_));
      if (!waited.ok()) {
        return absl::Status(waited.code(), absl::StrCat(waited.message(), ": ",
                                                        last.message()));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PgBouncer::Query(const std::string& sql) {
  return QueryAs(kUser, sql);
}

absl::StatusOr<std::string> PgBouncer::QueryAs(const std::string& user,
                                               const std::string& sql,
                                               const std::string& dbname) {
  absl::StatusOr<std::string> out =
      RunCommand({"/usr/lib/postgresql/15/bin/psql", "-X", "-q", "-At", "-v",
                  "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p",
                  absl::StrCat(port_), "-U", user, "-d", dbname, "-c", sql},
                 "", {}, absl::Seconds(10));
  if (!out.ok()) return out.status();
  while (!out->empty() && out->back() == '\n') out->pop_back();
  return out;
}

PgBouncer::~PgBouncer() {
  process_.Stop();
  RemoveTree(dir_);
}

std::string PgBouncer::Uri(const std::string& user,
                           const std::string& query) const {
  return absl::StrCat("postgres://", user, "@127.0.0.1:", port_, "/postgres?",
                      query);
}

}  // namespace dlock::test
