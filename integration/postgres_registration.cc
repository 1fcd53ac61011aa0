// Copyright dlock authors. PostgreSQL in the test registry (test_servers.h):
// one server (an initdb takes seconds) shared by both modes, lease (rows
// with expiries) and session (rows bound to advisory locks); and, for the
// tests that ask for variants, a primary with a synchronous standby that
// fails over (postgres_replicated_*), and the same server behind PgBouncer
// as a user that may not create tables (postgres_pgbouncer_*).
#include <mutex>

#include "dlock/dlock.h"
#include "pgbouncer.h"
#include "postgres_replication.h"
#include "postgres_server.h"
#include "test_servers.h"

namespace dlock::test {
namespace {

SharedServer<PostgresServer> shared("PostgreSQL",
                                    [] { return PostgresServer::Start(); });

TestBackend Mode(const std::string& mode) {
  return TestBackend{
      .label = "postgres_" + mode,
      .backend = "postgres",
      .variant = false,
      .shared_across_processes = true,
      .uri = [mode](const UriRequest& r) -> absl::StatusOr<std::string> {
        absl::StatusOr<PostgresServer*> server = shared.Get();
        if (!server.ok()) return server.status();
        std::string extra = "mode=" + mode;
        if (!r.extra.empty()) absl::StrAppend(&extra, "&", r.extra);
        return (*server)->UriAt(r.port != 0 ? r.port : (*server)->port(), r.ns,
                                extra);
      },
      .unreachable_uri =
          [](const std::string& ns) {
            return absl::StrCat("postgres://127.0.0.1:1/postgres?namespace=",
                                ns);
          },
      .port = shared.PortHook(),
      // A fast shutdown and start with the data kept: lease-mode holds
      // survive; session-mode holds end with their sessions.
      .restart = shared.Hook([](PostgresServer& s) { return s.Restart(); }),
      .stop = shared.VoidHook([](PostgresServer& s) { s.StopServer(); }),
      .start = shared.Hook([](PostgresServer& s) { return s.StartServer(); }),
      .kill = shared.VoidHook([](PostgresServer& s) { s.Kill(); }),
      .pause = shared.VoidHook([](PostgresServer& s) { s.Pause(); }),
      .resume = shared.VoidHook([](PostgresServer& s) { s.Resume(); }),
      .terminate_sessions =
          [](const std::string& application_name) -> absl::StatusOr<int> {
        absl::StatusOr<PostgresServer*> server = shared.Get();
        if (!server.ok()) return server.status();
        return (*server)->TerminateBackends(application_name);
      },
      // Session mode: others take a dead session's row over 2 s after the
      // server saw it gone (the default grace is 3 s).
      .short_session_param = mode == "session" ? "session_grace=2s" : "",
      .conformance_deviations = {},
  };
}

// The user the PgBouncer entries log in as: it may not create tables (the
// default of PostgreSQL 15); the superuser creates them and grants it what
// dlock needs, as `dlock setup --grant-to` does.
constexpr char kAppUser[] = "dlock_app";
// A database of PgBouncer's that is `postgres` pooled by session, for the
// listener of a client whose other connections are pooled by transaction.
constexpr char kListenAlias[] = "postgres_listen";

absl::Status SetUpAppUser(PostgresServer& server) {
  static std::once_flag once;
  static absl::Status* done = new absl::Status;
  std::call_once(once, [&] {
    absl::StatusOr<std::string> role =
        server.Psql(absl::StrCat("CREATE ROLE ", kAppUser, " LOGIN;"));
    if (!role.ok()) {
      *done = role.status();
      return;
    }
    *done =
        Connect(server.Uri("", absl::StrCat("grant_to=", kAppUser))).status();
  });
  return *done;
}

absl::StatusOr<std::unique_ptr<PgBouncer>> StartBouncer(
    const std::string& pool_mode) {
  absl::StatusOr<PostgresServer*> server = shared.Get();
  if (!server.ok()) return server.status();
  if (absl::Status s = SetUpAppUser(**server); !s.ok()) return s;
  // Session pooling needs a server connection per client connection (a
  // session-mode client has one per hold): room for the suite's busiest
  // case, under the server's max_connections.
  return PgBouncer::Start({.server_port = (*server)->port(),
                           .pool_mode = pool_mode,
                           .pool_size = pool_mode == "session" ? 300 : 20,
                           .users = {"postgres", kAppUser},
                           .session_alias = kListenAlias});
}

SharedServer<PgBouncer> transaction_pooling(
    "PgBouncer (pool_mode = transaction) in front of PostgreSQL",
    [] { return StartBouncer("transaction"); });
SharedServer<PgBouncer> session_pooling(
    "PgBouncer (pool_mode = session) in front of PostgreSQL",
    [] { return StartBouncer("session"); });

// `mode` through PgBouncer in `pooling`: lease mode through transaction
// pooling, its listener through the alias pooled by session (as
// docs/postgres.md advises), session mode through session pooling (the one
// it accepts). Faults hit the server behind PgBouncer, which stays up.
TestBackend Pooled(const std::string& mode, SharedServer<PgBouncer>* pooling) {
  TestBackend entry = Mode(mode);
  entry.label = "postgres_pgbouncer_" + mode;
  entry.variant = true;
  entry.uri = [mode,
               pooling](const UriRequest& r) -> absl::StatusOr<std::string> {
    absl::StatusOr<PgBouncer*> bouncer = pooling->Get();
    if (!bouncer.ok()) return bouncer.status();
    if (r.port != 0) {
      return absl::UnimplementedError(
          "postgres_pgbouncer has no proxy port: a proxy stands between the "
          "client and PgBouncer only in tests of their own");
    }
    std::string query = "mode=" + mode;
    if (mode == "lease")
      absl::StrAppend(&query, "&listen_dbname=", kListenAlias);
    if (!r.ns.empty()) query = absl::StrCat("namespace=", r.ns, "&", query);
    if (!r.extra.empty()) absl::StrAppend(&query, "&", r.extra);
    return (*bouncer)->Uri(kAppUser, query);
  };
  entry.port = pooling->PortHook();
  // Back once PgBouncer serves again, as clients of a restarted server
  // behind it would find it.
  auto serving = [pooling](std::function<absl::Status()> fault) {
    return [pooling, fault]() -> absl::Status {
      if (absl::Status s = fault(); !s.ok()) return s;
      return pooling->Hook([](PgBouncer& b) { return b.WaitServing(); })();
    };
  };
  entry.restart = serving(entry.restart);
  entry.start = serving(entry.start);
  // PgBouncer reaches the server by itself: terminating a backend ends
  // its server connection, not necessarily a session of the client.
  entry.terminate_sessions = nullptr;
  return entry;
}

SharedServer<PostgresReplication> replicated(
    "a PostgreSQL primary and its synchronous standby",
    [] { return PostgresReplication::Start({.synchronous = true}); });

// Clients reach whichever server is primary through libpq's host list
// (target_session_attrs=read-write). The failover hooks act on the pair;
// restarts and pauses of one server are the plain entries' business.
TestBackend Replicated(const std::string& mode) {
  return TestBackend{
      .label = "postgres_replicated_" + mode,
      .backend = "postgres",
      .variant = true,
      .shared_across_processes = true,
      .uri = [mode](const UriRequest& r) -> absl::StatusOr<std::string> {
        absl::StatusOr<PostgresReplication*> pair = replicated.Get();
        if (!pair.ok()) return pair.status();
        if (r.port != 0) {
          return absl::UnimplementedError(
              "postgres_replicated has no proxy port: its clients follow "
              "the primary through libpq's host list");
        }
        std::string extra = "mode=" + mode;
        if (!r.extra.empty()) absl::StrAppend(&extra, "&", r.extra);
        return (*pair)->Uri(r.ns, extra);
      },
      .unreachable_uri =
          [](const std::string& ns) {
            return absl::StrCat(
                "postgres://127.0.0.1:1,127.0.0.1:1/postgres?namespace=", ns);
          },
      .port = []() -> absl::StatusOr<int> {
        absl::StatusOr<PostgresReplication*> pair = replicated.Get();
        if (!pair.ok()) return pair.status();
        return (*pair)->primary().port();
      },
      .kill_primary =
          replicated.VoidHook([](PostgresReplication& p) { p.KillPrimary(); }),
      .promote_standby =
          replicated.Hook([](PostgresReplication& p) { return p.Promote(); }),
      .rebuild_standby =
          replicated.Hook([](PostgresReplication& p) { return p.Rebuild(); }),
      .short_session_param = mode == "session" ? "session_grace=2s" : "",
  };
}

// Lease first: the mode a URI without `mode=` gets.
const TestBackendRegistration registration(
    {Mode("lease"), Mode("session"), Replicated("lease"), Replicated("session"),
     Pooled("lease", &transaction_pooling),
     Pooled("session", &session_pooling)});

}  // namespace
}  // namespace dlock::test
