// Copyright dlock authors. PostgreSQL in the test registry (test_servers.h):
// one server (an initdb takes seconds) shared by both modes, lease (rows
// with expiries) and session (rows bound to advisory locks); and, for the
// tests that ask for variants, a primary with a synchronous standby that
// fails over (postgres_replicated_*).
#include "postgres_replication.h"
#include "postgres_server.h"
#include "test_servers.h"

namespace dlock::testing {
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
const TestBackendRegistration registration({Mode("lease"), Mode("session"),
                                            Replicated("lease"),
                                            Replicated("session")});

}  // namespace
}  // namespace dlock::testing
