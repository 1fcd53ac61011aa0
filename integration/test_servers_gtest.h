// Copyright dlock authors. The test registry (test_servers.h) in gtest cases.
#ifndef DLOCK_INTEGRATION_TEST_SERVERS_GTEST_H_
#define DLOCK_INTEGRATION_TEST_SERVERS_GTEST_H_

#include <string>

#include "gtest/gtest.h"
#include "test_servers.h"

namespace dlock::test {

// A URI of `backend` for namespace `ns`. If its server does not start, the
// calling case fails with what is missing (never skips) and gets a URI that
// refuses connections, so that it fails at Connect too.
inline std::string UriForTest(const TestBackend& backend, const std::string& ns,
                              const std::string& extra = "") {
  absl::StatusOr<std::string> uri = backend.uri({.ns = ns, .extra = extra});
  if (!uri.ok()) {
    ADD_FAILURE() << backend.label << ": " << uri.status();
    return backend.unreachable_uri(ns);
  }
  return *uri;
}

// Names the cases of a suite instantiated with TestBackends() by label:
//   INSTANTIATE_TEST_SUITE_P(Backends, T, ValuesIn(TestBackends()),
//                            TestBackendName);
inline std::string TestBackendName(
    const ::testing::TestParamInfo<TestBackend>& info) {
  return info.param.label;
}

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_TEST_SERVERS_GTEST_H_
