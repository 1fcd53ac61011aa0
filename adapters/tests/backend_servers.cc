#include "backend_servers.h"

#include "test_servers.h"
#include "test_servers_gtest.h"

namespace dlock::testing {

std::vector<ServerBackend> ServerBackends() {
  std::vector<ServerBackend> backends;
  for (const TestBackend& entry :
       TestBackends({.across_processes = true, .one_per_backend = true})) {
    // Named by backend ("postgres", not "postgres_lease"): one entry each.
    backends.push_back({entry.backend, [entry](const std::string& ns) {
                          return UriForTest(entry, ns);
                        }});
  }
  return backends;
}

}  // namespace dlock::testing
