// Copyright dlock authors. etcd in the test registry (test_servers.h): one
// member (etcd from Debian's etcd-server), and for the tests that ask for
// variants a cluster of three on loopback (etcd_cluster), whose URI names
// every member.
#include "etcd_server.h"
#include "test_servers.h"

namespace dlock::test {
namespace {

SharedServer<EtcdServer> single("etcd", [] { return EtcdServer::Start(); });
SharedServer<EtcdServer> cluster("an etcd cluster of three", [] {
  return EtcdServer::Start({.members = 3});
});

TestBackend Entry(const std::string& label, SharedServer<EtcdServer>& shared,
                  bool variant) {
  return TestBackend{
      .label = label,
      .backend = "etcd",
      .variant = variant,
      .shared_across_processes = true,
      .uri = [&shared](const UriRequest& r) -> absl::StatusOr<std::string> {
        absl::StatusOr<EtcdServer*> server = shared.Get();
        if (!server.ok()) return server.status();
        // Through a fault proxy: the first member behind it, alone.
        if (r.port != 0) {
          return WithQuery(absl::StrCat("etcd://127.0.0.1:", r.port), r);
        }
        return WithQuery(absl::StrCat("etcd://", (*server)->Hosts()), r);
      },
      .unreachable_uri =
          [](const std::string& ns) {
            return absl::StrCat("etcd://127.0.0.1:1?namespace=", ns);
          },
      .port = shared.PortHook(),
      // The data directories are kept: keys and leases survive a restart
      // (etcd gives each lease its whole TTL again when it starts).
      .restart = shared.Hook([](EtcdServer& s) { return s.Restart(); }),
      .stop = shared.VoidHook([](EtcdServer& s) { s.StopAll(); }),
      .start = shared.Hook([](EtcdServer& s) { return s.StartAll(); }),
      .kill = shared.VoidHook([](EtcdServer& s) { s.KillMember(0); }),
      .pause = shared.VoidHook([](EtcdServer& s) { s.PauseMember(0); }),
      .resume = shared.VoidHook([](EtcdServer& s) { s.ResumeMember(0); }),
      .terminate_sessions = nullptr,
      // Holds live on leases of their own, not on a session.
      .short_session_param = "",
      .keep_seen_late = absl::Milliseconds(1500),
      .conformance_deviations = {},
  };
}

const TestBackendRegistration registration(
    {Entry("etcd", single, /*variant=*/false),
     Entry("etcd_cluster", cluster, /*variant=*/true)});

}  // namespace
}  // namespace dlock::test
