// Copyright dlock authors. PostgreSQL in the test registry (test_servers.h):
// one server (an initdb takes seconds) shared by both modes, lease (rows
// with expiries) and session (rows bound to advisory locks).
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

// Lease first: the mode a URI without `mode=` gets.
const TestBackendRegistration registration({Mode("lease"), Mode("session")});

}  // namespace
}  // namespace dlock::testing
