// Copyright dlock authors. The conformance suite against memory://, the
// in-process reference backend.
#include <unistd.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "conformance_fixture.h"

namespace dlock::testing {
namespace {

BackendUnderTest MemoryBackend() {
  // An instance of this run's own: clients of this binary share it, as they
  // would share a server, and nothing else does.
  std::random_device random;
  const std::string instance = absl::StrCat(
      "conformance-", getpid(), "-", absl::Hex(random(), absl::kZeroPad8));
  return BackendUnderTest{
      .label = "memory",
      .uri =
          [instance](const std::string& ns) {
            return absl::StrCat("memory://", instance, "?namespace=", ns);
          },
      // No server to stop, restart, or reach from another process; each case
      // below is listed as a deviation in docs/backends.md.
      .restart_server = nullptr,
      .stop_server = nullptr,
      .start_server = nullptr,
      .shared_across_processes = false,
      .deviations = {"C2_KilledHolderProcessBlocksAtMostItsLease",
                     "C18_ServerRestartReportsLostAndClientReconnects",
                     "C18_UnavailableWhileServerIsDownThenRecovers"},
  };
}

INSTANTIATE_TEST_SUITE_P(Memory, Conformance,
                         ::testing::Values(MemoryBackend()),
                         Conformance::ParamName);

}  // namespace
}  // namespace dlock::testing
