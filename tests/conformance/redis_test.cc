// Copyright dlock authors. The conformance suite against a real redis-server
// started for this binary (integration/redis_server.h).
#include <memory>

#include "absl/status/statusor.h"
#include "conformance_fixture.h"
#include "redis_server.h"

namespace dlock::testing {
namespace {

// One server for the whole binary, started on first use. A server that does
// not start fails the test that needed it, with the harness's message (which
// says what to install): a missing server never skips a case.
RedisServer* SharedServer() {
  static absl::StatusOr<std::unique_ptr<RedisServer>> server =
      RedisServer::Start();
  if (!server.ok()) {
    ADD_FAILURE() << "cannot start redis-server: " << server.status();
    return nullptr;
  }
  return server->get();
}

absl::Status NoServer() {
  return absl::FailedPreconditionError("redis-server did not start");
}

BackendUnderTest Redis() {
  return BackendUnderTest{
      .label = "redis",
      .uri = [](const std::string& ns) -> std::string {
        RedisServer* server = SharedServer();
        // Port 1 refuses connections, so the case fails at Connect too.
        return server != nullptr ? server->Uri(ns)
                                 : "redis://127.0.0.1:1?namespace=" + ns;
      },
      // Without persistence a restart loses every key, as a master restarted
      // without persistence would.
      .restart_server = []() -> absl::Status {
        RedisServer* server = SharedServer();
        return server != nullptr ? server->Restart() : NoServer();
      },
      .stop_server =
          [] {
            if (RedisServer* server = SharedServer()) server->StopServer();
          },
      .start_server = []() -> absl::Status {
        RedisServer* server = SharedServer();
        return server != nullptr ? server->StartServer() : NoServer();
      },
      .shared_across_processes = true,
      .deviations = {},
  };
}

INSTANTIATE_TEST_SUITE_P(Redis, Conformance, ::testing::Values(Redis()),
                         Conformance::ParamName);

}  // namespace
}  // namespace dlock::testing
