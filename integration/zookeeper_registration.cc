// Copyright dlock authors. ZooKeeper in the test registry (test_servers.h):
// one standalone server (a JVM takes a second or two to start).
#include "test_servers.h"
#include "zookeeper_server.h"

namespace dlock::test {
namespace {

SharedServer<ZooKeeperServer> shared("ZooKeeper",
                                     [] { return ZooKeeperServer::Start(); });

const TestBackendRegistration registration({TestBackend{
    .label = "zookeeper",
    .backend = "zookeeper",
    .variant = false,
    .shared_across_processes = true,
    .uri = [](const UriRequest& r) -> absl::StatusOr<std::string> {
      absl::StatusOr<ZooKeeperServer*> server = shared.Get();
      if (!server.ok()) return server.status();
      const int port = r.port != 0 ? r.port : (*server)->client_port(0);
      return WithQuery(absl::StrCat("zk://127.0.0.1:", port), r);
    },
    .unreachable_uri =
        [](const std::string& ns) {
          return absl::StrCat("zk://127.0.0.1:1?namespace=", ns);
        },
    .port = []() -> absl::StatusOr<int> {
      absl::StatusOr<ZooKeeperServer*> server = shared.Get();
      if (!server.ok()) return server.status();
      return (*server)->client_port(0);
    },
    // The data directory is kept: sessions and their nodes survive a
    // restart, as they survive the restart of an ensemble member.
    .restart = shared.Hook([](ZooKeeperServer& s) { return s.Restart(); }),
    .stop = shared.VoidHook([](ZooKeeperServer& s) { s.StopAll(); }),
    .start = shared.Hook([](ZooKeeperServer& s) { return s.StartAll(); }),
    .kill = shared.VoidHook([](ZooKeeperServer& s) { s.KillMember(0); }),
    .pause = shared.VoidHook([](ZooKeeperServer& s) { s.PauseMember(0); }),
    .resume = shared.VoidHook([](ZooKeeperServer& s) { s.ResumeMember(0); }),
    .terminate_sessions = nullptr,
    .short_session_param = "session_timeout=2s",
    .conformance_deviations = {},
}});

}  // namespace
}  // namespace dlock::test
