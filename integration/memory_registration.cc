// Copyright dlock authors. memory:// in the test registry (test_servers.h):
// no server, and nothing to share with another process. Clients of this
// process share one instance of its own, as they would share a server.
#include <unistd.h>

#include <random>

#include "test_servers.h"

namespace dlock::test {
namespace {

std::string Instance() {
  static const std::string* instance = [] {
    std::random_device random;
    return new std::string(absl::StrCat("test-", getpid(), "-",
                                        absl::Hex(random(), absl::kZeroPad8)));
  }();
  return *instance;
}

const TestBackendRegistration registration({TestBackend{
    .label = "memory",
    .backend = "memory",
    .variant = false,
    .shared_across_processes = false,
    .uri = [](const UriRequest& r) -> absl::StatusOr<std::string> {
      if (r.port != 0) {
        return absl::InvalidArgumentError("memory:// has no port to proxy");
      }
      return WithQuery(absl::StrCat("memory://", Instance()), r);
    },
    .unreachable_uri =
        [](const std::string& ns) {
          return absl::StrCat("memory://", Instance(), "?namespace=", ns);
        },
    // No server to reach, stop, restart or signal.
    .port = nullptr,
    .restart = nullptr,
    .stop = nullptr,
    .start = nullptr,
    .kill = nullptr,
    .pause = nullptr,
    .resume = nullptr,
    .terminate_sessions = nullptr,
    .short_session_param = "",
    // Each case needs a server to stop, restart, or reach from another
    // process; docs/backends.md lists them.
    .conformance_deviations =
        {"C2_KilledHolderProcessBlocksAtMostItsLease",
         "C22_PermitsOfAKilledHolderComeBackWithinTheLease",
         "Keep_OutlivesTheReleasingProcess",
         "C18_ServerRestartReportsLostAndClientReconnects",
         "C18_UnavailableWhileServerIsDownThenRecovers"},
}});

}  // namespace
}  // namespace dlock::test
