// Copyright dlock authors. The conformance suite against a real ZooKeeper
// (Debian's `zookeeper` package) started for this binary
// (integration/zookeeper_server.h).
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "conformance_fixture.h"
#include "zookeeper_server.h"

namespace dlock::testing {
namespace {

// One standalone server for the whole binary, started on first use (a JVM
// takes a second or two). A server that does not start fails the test that
// needed it with the harness's message, which says what to install.
ZooKeeperServer* SharedServer() {
  static absl::StatusOr<std::unique_ptr<ZooKeeperServer>> server =
      ZooKeeperServer::Start();
  if (!server.ok()) {
    ADD_FAILURE() << "cannot start ZooKeeper: " << server.status();
    return nullptr;
  }
  return server->get();
}

absl::Status NoServer() {
  return absl::FailedPreconditionError("ZooKeeper did not start");
}

BackendUnderTest ZooKeeper() {
  return BackendUnderTest{
      .label = "zookeeper",
      .uri = [](const std::string& ns) -> std::string {
        ZooKeeperServer* server = SharedServer();
        // Port 1 refuses connections, so the case fails at Connect too.
        return server != nullptr ? server->Uri(ns)
                                 : "zk://127.0.0.1:1?namespace=" + ns;
      },
      // The data directory is kept: sessions and their nodes survive a
      // restart, as they survive the restart of an ensemble member.
      .restart_server = []() -> absl::Status {
        ZooKeeperServer* server = SharedServer();
        return server != nullptr ? server->Restart() : NoServer();
      },
      .stop_server =
          [] {
            if (ZooKeeperServer* server = SharedServer()) server->StopAll();
          },
      .start_server = []() -> absl::Status {
        ZooKeeperServer* server = SharedServer();
        return server != nullptr ? server->StartAll() : NoServer();
      },
      .shared_across_processes = true,
      .deviations = {},
  };
}

INSTANTIATE_TEST_SUITE_P(ZooKeeper, Conformance, ::testing::Values(ZooKeeper()),
                         Conformance::ParamName);

}  // namespace
}  // namespace dlock::testing
