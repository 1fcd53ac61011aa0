// Copyright dlock authors. The server backends of this build, each with a
// throwaway server started on first use and kept for the whole test binary,
// for the tests that need clients in separate processes (memory:// cannot):
// one entry per backend from the test registry (integration/test_servers.h).
#ifndef DLOCK_ADAPTERS_TESTS_BACKEND_SERVERS_H_
#define DLOCK_ADAPTERS_TESTS_BACKEND_SERVERS_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace dlock::test {

struct ServerBackend {
  std::string label;  // the backend's name: "redis", "zookeeper", "postgres"
  // A URI for namespace `ns`. Starts the server on first use; if it does not
  // start, the calling test fails with the harness's message (which says what
  // to install) and gets a URI that refuses connections.
  std::function<std::string(const std::string& ns)> uri;
  // The same with a 2 s holder liveness: `liveness_ttl=2s`, and where holds
  // live on a session, a 2 s session timeout (ZooKeeper) or grace
  // (PostgreSQL session mode).
  std::function<std::string(const std::string& ns)> short_liveness_uri;
  // TestBackend::keep_seen_late: how much later than its end a fresh client
  // may still find a kept lock kept.
  absl::Duration keep_seen_late;
};

inline std::ostream& operator<<(std::ostream& os, const ServerBackend& b) {
  return os << b.label;
}

// The first registry entry of each backend compiled in whose locks clients
// in separate processes share (for postgres, lease mode).
std::vector<ServerBackend> ServerBackends();

// Names the cases of a suite instantiated with ServerBackends() by label:
//   INSTANTIATE_TEST_SUITE_P(Backends, T, ValuesIn(ServerBackends()),
//                            ServerBackendName);
inline std::string ServerBackendName(
    const ::testing::TestParamInfo<ServerBackend>& info) {
  return info.param.label;
}

}  // namespace dlock::test

#endif  // DLOCK_ADAPTERS_TESTS_BACKEND_SERVERS_H_
