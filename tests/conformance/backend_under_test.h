// Copyright dlock authors. What the conformance suite needs to know about a
// backend: how to make a client URI and which faults its harness can inject.
// backends.cc makes one from each entry of the test registry
// (integration/test_servers.h).
#ifndef DLOCK_TESTS_CONFORMANCE_BACKEND_UNDER_TEST_H_
#define DLOCK_TESTS_CONFORMANCE_BACKEND_UNDER_TEST_H_

#include <functional>
#include <ostream>
#include <set>
#include <string>

#include "absl/status/status.h"

namespace dlock::test {

struct BackendUnderTest {
  std::string label;  // "memory", "redis", "zookeeper", ...
  // A URI for a new client in namespace `ns` (tests give each test its own).
  std::function<std::string(const std::string& ns)> uri;
  // Stops the server and starts it again on the same address; null where the
  // harness cannot (the in-process backend). Whether holds survive is the
  // backend's business: the suite checks that nothing hangs or crashes, that
  // calls in between fail with Unavailable, that holds that could not be
  // kept are reported lost, and that the client reconnects (C18).
  std::function<absl::Status()> restart_server;
  // Stops / starts the server (for "unreachable" cases); null if unsupported.
  std::function<void()> stop_server;
  std::function<absl::Status()> start_server;
  // Whether clients in separate processes share locks (not memory://).
  bool shared_across_processes = false;
  // Test names (without the suite prefix) that are documented deviations
  // for this backend, listed in docs/backends.md.
  std::set<std::string> deviations;
};

inline std::ostream& operator<<(std::ostream& os, const BackendUnderTest& b) {
  return os << b.label;
}

}  // namespace dlock::test

#endif  // DLOCK_TESTS_CONFORMANCE_BACKEND_UNDER_TEST_H_
