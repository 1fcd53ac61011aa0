#include "backend_servers.h"

#include "absl/strings/str_cat.h"
#include "test_servers.h"
#include "test_servers_gtest.h"

namespace dlock::test {

std::vector<ServerBackend> ServerBackends() {
  std::vector<ServerBackend> backends;
  for (const TestBackend& entry :
       TestBackends({.across_processes = true, .one_per_backend = true})) {
    // Named by backend ("postgres", not "postgres_lease"): one entry each.
    std::string short_liveness = "liveness_ttl=2s";
    if (!entry.short_session_param.empty()) {
      absl::StrAppend(&short_liveness, "&", entry.short_session_param);
    }
    backends.push_back(
        {.label = entry.backend,
         .uri =
             [entry](const std::string& ns) { return UriForTest(entry, ns); },
         .short_liveness_uri =
             [entry, short_liveness](const std::string& ns) {
               return UriForTest(entry, ns, short_liveness);
             },
         .keep_seen_late = entry.keep_seen_late});
  }
  return backends;
}

}  // namespace dlock::test
