// Copyright dlock authors. The conformance suite against a real PostgreSQL
// started for this binary (integration/postgres_server.h), in both modes:
// lease (rows with expiries) and session (rows bound to advisory locks).
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "conformance_fixture.h"
#include "postgres_server.h"

namespace dlock::testing {
namespace {

// One server for the whole binary, shared by both modes, started on first
// use. A server that does not start fails the test that needed it with the
// harness's message (which says what to install).
PostgresServer* SharedServer() {
  static absl::StatusOr<std::unique_ptr<PostgresServer>> server =
      PostgresServer::Start();
  if (!server.ok()) {
    ADD_FAILURE() << "cannot start postgres: " << server.status();
    return nullptr;
  }
  return server->get();
}

absl::Status NoServer() {
  return absl::FailedPreconditionError("postgres did not start");
}

BackendUnderTest Postgres(const std::string& label, const std::string& mode) {
  return BackendUnderTest{
      .label = label,
      .uri = [mode](const std::string& ns) -> std::string {
        PostgresServer* server = SharedServer();
        // Port 1 refuses connections, so the case fails at Connect too.
        return server != nullptr
                   ? server->Uri(ns, "mode=" + mode)
                   : "postgres://127.0.0.1:1/postgres?namespace=" + ns;
      },
      // A fast shutdown and start with the data kept: lease-mode holds
      // survive; session-mode holds end with their sessions.
      .restart_server = []() -> absl::Status {
        PostgresServer* server = SharedServer();
        return server != nullptr ? server->Restart() : NoServer();
      },
      .stop_server =
          [] {
            if (PostgresServer* server = SharedServer()) server->StopServer();
          },
      .start_server = []() -> absl::Status {
        PostgresServer* server = SharedServer();
        return server != nullptr ? server->StartServer() : NoServer();
      },
      .shared_across_processes = true,
      .deviations = {},
  };
}

INSTANTIATE_TEST_SUITE_P(Postgres, Conformance,
                         ::testing::Values(Postgres("postgres_lease", "lease"),
                                           Postgres("postgres_session",
                                                    "session")),
                         Conformance::ParamName);

}  // namespace
}  // namespace dlock::testing
