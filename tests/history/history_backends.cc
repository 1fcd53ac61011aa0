#include "history_backends.h"

#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

#ifdef DLOCK_HISTORY_REDIS
#include "redis_server.h"
#endif
#ifdef DLOCK_HISTORY_ZOOKEEPER
#include "zookeeper_server.h"
#endif
#ifdef DLOCK_HISTORY_POSTGRES
#include <libpq-fe.h>

#include "postgres_server.h"
#endif

namespace dlock::testing {
namespace {

#ifdef DLOCK_HISTORY_REDIS
class RedisBackend : public HistoryBackend {
 public:
  explicit RedisBackend(std::unique_ptr<RedisServer> server)
      : server_(std::move(server)) {}
  int port() const override { return server_->port(); }
  std::string Uri(int proxy_port, const std::string& ns, int,
                  bool) const override {
    return absl::StrCat("redis://127.0.0.1:", proxy_port, "?namespace=", ns);
  }
  absl::Status KillAndRestart() override {
    server_->Kill();
    return server_->StartServer();
  }
  absl::Status StopAndStart(absl::Duration down) override {
    server_->StopServer();
    absl::SleepFor(down);
    return server_->StartServer();
  }

 private:
  std::unique_ptr<RedisServer> server_;
};
#endif

#ifdef DLOCK_HISTORY_ZOOKEEPER
class ZooKeeperBackend : public HistoryBackend {
 public:
  explicit ZooKeeperBackend(std::unique_ptr<ZooKeeperServer> server)
      : server_(std::move(server)) {}
  int port() const override { return server_->client_port(0); }
  std::string Uri(int proxy_port, const std::string& ns, int,
                  bool short_session) const override {
    return absl::StrCat("zk://127.0.0.1:", proxy_port, "?namespace=", ns,
                        short_session ? "&session_timeout=2s" : "");
  }
  absl::Status KillAndRestart() override {
    server_->KillMember(0);
    return server_->StartMember(0);
  }
  absl::Status StopAndStart(absl::Duration down) override {
    server_->StopMember(0);
    absl::SleepFor(down);
    return server_->StartMember(0);
  }

 private:
  std::unique_ptr<ZooKeeperServer> server_;
};
#endif

#ifdef DLOCK_HISTORY_POSTGRES
class PostgresBackend : public HistoryBackend {
 public:
  PostgresBackend(PostgresServer* server, std::string mode)
      : server_(server), mode_(std::move(mode)) {}
  int port() const override { return server_->port(); }
  std::string Uri(int proxy_port, const std::string& ns, int i,
                  bool) const override {
    return absl::StrCat("postgres://postgres@127.0.0.1:", proxy_port,
                        "/postgres?namespace=", ns, "&mode=", mode_,
                        "&application_name=history-worker-", i);
  }
  absl::Status KillAndRestart() override {
    server_->Kill();
    return server_->StartServer();
  }
  absl::Status StopAndStart(absl::Duration down) override {
    server_->StopServer();
    absl::SleepFor(down);
    return server_->StartServer();
  }
  absl::Status TerminateSessionsOf(int i) override {
    const std::string conninfo =
        absl::StrCat("host=127.0.0.1 port=", server_->port(),
                     " user=postgres dbname=postgres connect_timeout=5");
    PGconn* conn = PQconnectdb(conninfo.c_str());
    absl::Status status = absl::OkStatus();
    if (PQstatus(conn) != CONNECTION_OK) {
      status = absl::UnavailableError(PQerrorMessage(conn));
    } else {
      const std::string sql = absl::StrCat(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
          "WHERE application_name = 'history-worker-",
          i, "'");
      PGresult* r = PQexec(conn, sql.c_str());
      if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        status = absl::InternalError(PQresultErrorMessage(r));
      }
      PQclear(r);
    }
    PQfinish(conn);
    return status;
  }

 private:
  PostgresServer* server_;  // shared by both modes
  std::string mode_;
};
#endif

absl::StatusOr<std::unique_ptr<HistoryBackend>> StartBackend(
    const std::string& name) {
#ifdef DLOCK_HISTORY_REDIS
  if (name == "redis" || name == "redis_aof") {
    RedisServer::Options options;
    options.persistence = name == "redis_aof";
    absl::StatusOr<std::unique_ptr<RedisServer>> server =
        RedisServer::Start(options);
    if (!server.ok()) return server.status();
    return std::make_unique<RedisBackend>(*std::move(server));
  }
#endif
#ifdef DLOCK_HISTORY_ZOOKEEPER
  if (name == "zookeeper") {
    absl::StatusOr<std::unique_ptr<ZooKeeperServer>> server =
        ZooKeeperServer::Start();
    if (!server.ok()) return server.status();
    return std::make_unique<ZooKeeperBackend>(*std::move(server));
  }
#endif
#ifdef DLOCK_HISTORY_POSTGRES
  if (name == "postgres_lease" || name == "postgres_session") {
    // One server for both modes.
    static absl::StatusOr<std::unique_ptr<PostgresServer>>* server =
        new absl::StatusOr<std::unique_ptr<PostgresServer>>(
            PostgresServer::Start());
    if (!server->ok()) return server->status();
    return std::make_unique<PostgresBackend>(
        server->value().get(), name == "postgres_lease" ? "lease" : "session");
  }
#endif
  return absl::InvalidArgumentError(
      absl::StrCat("no backend '", name, "' in this build"));
}

}  // namespace

absl::Status HistoryBackend::TerminateSessionsOf(int) {
  return absl::UnimplementedError(
      "terminating sessions does not apply to this backend");
}

std::vector<std::string> BuiltBackends() {
  std::vector<std::string> names;
#ifdef DLOCK_HISTORY_REDIS
  names.insert(names.end(), {"redis", "redis_aof"});
#endif
#ifdef DLOCK_HISTORY_ZOOKEEPER
  names.push_back("zookeeper");
#endif
#ifdef DLOCK_HISTORY_POSTGRES
  names.insert(names.end(), {"postgres_lease", "postgres_session"});
#endif
  return names;
}

absl::StatusOr<HistoryBackend*> SharedBackend(const std::string& name) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* started =
      new std::map<std::string,
                   absl::StatusOr<std::unique_ptr<HistoryBackend>>>;
  absl::MutexLock lock(&mu);
  auto it = started->find(name);
  if (it == started->end()) {
    it = started->emplace(name, StartBackend(name)).first;
  }
  if (!it->second.ok()) return it->second.status();
  return it->second->get();
}

}  // namespace dlock::testing
