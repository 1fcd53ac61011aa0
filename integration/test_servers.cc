#include "test_servers.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dlock::test {
namespace {

// Filled by static initializers only, before main; read afterwards.
std::vector<TestBackend>& Registry() {
  static auto* entries = new std::vector<TestBackend>;
  return *entries;
}

}  // namespace

TestBackendRegistration::TestBackendRegistration(
    std::vector<TestBackend> entries) {
  std::vector<TestBackend>& registry = Registry();
  for (TestBackend& entry : entries) {
    for (const TestBackend& other : registry) {
      if (other.label == entry.label) {
        std::fprintf(stderr, "test backend '%s' registered twice\n",
                     entry.label.c_str());
        std::abort();
      }
    }
    registry.push_back(std::move(entry));
  }
}

std::vector<TestBackend> TestBackends(const TestBackendFilter& filter) {
  std::vector<TestBackend> out;
  std::set<std::string> backends_seen;
  for (const TestBackend& entry : Registry()) {
    if (!filter.backend.empty() && entry.backend != filter.backend) continue;
    if (filter.across_processes && !entry.shared_across_processes) continue;
    if (entry.variant && !filter.with_variants) continue;
    if (filter.one_per_backend && !entry.variant &&
        !backends_seen.insert(entry.backend).second) {
      continue;
    }
    out.push_back(entry);
  }
  // Registration files run in an unspecified order; within one, its order.
  std::stable_sort(out.begin(), out.end(),
                   [](const TestBackend& a, const TestBackend& b) {
                     return a.backend < b.backend;
                   });
  return out;
}

std::string WithQuery(std::string base, const UriRequest& request) {
  const char* sep = "?";
  if (!request.ns.empty()) {
    absl::StrAppend(&base, sep, "namespace=", request.ns);
    sep = "&";
  }
  if (!request.extra.empty()) absl::StrAppend(&base, sep, request.extra);
  return base;
}

absl::StatusOr<TestBackend> FindTestBackend(const std::string& label) {
  std::vector<std::string> labels;
  for (const TestBackend& entry : Registry()) {
    if (entry.label == label) return entry;
    labels.push_back(entry.label);
  }
  std::sort(labels.begin(), labels.end());
  return absl::NotFoundError(absl::StrCat(
      "no test backend '", label,
      "' in this build (it has: ", absl::StrJoin(labels, ", "), ")"));
}

}  // namespace dlock::test
