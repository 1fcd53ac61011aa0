// Copyright dlock authors. Instantiates the suite for the entries of the test
// registry (integration/test_servers.h) that run dlock::<backend>, the
// backend this binary is built for (DLOCK_CONFORMANCE_BACKEND): PostgreSQL
// has two (lease and session mode), and variants (through PgBouncer). Each
// entry's server is started once for the whole binary, on first use; one that
// does not start fails every case that needed it with what is missing (a
// missing server never skips a case).
#include <string>
#include <vector>

#include "conformance_fixture.h"
#include "test_servers.h"
#include "test_servers_gtest.h"

namespace dlock::test {
namespace {

// The registry's entries of this binary's backend: the variants, or the
// others.
std::vector<TestBackend> UnderTest(bool variants) {
  std::vector<TestBackend> out;
  for (const TestBackend& entry : TestBackends(
           {.backend = DLOCK_CONFORMANCE_BACKEND, .with_variants = variants})) {
    if (entry.variant == variants) out.push_back(entry);
  }
  return out;
}

TEST(ConformanceRegistry, BackendHasAnEntry) {
  EXPECT_FALSE(UnderTest(false).empty())
      << "no entry for backend '" << DLOCK_CONFORMANCE_BACKEND
      << "' in the test registry: add integration/" << DLOCK_CONFORMANCE_BACKEND
      << "_registration.cc";
}

INSTANTIATE_TEST_SUITE_P(Backends, Conformance,
                         ::testing::ValuesIn(UnderTest(false)),
                         TestBackendName);
// The registry's variants (PostgreSQL behind PgBouncer, ...): run only by
// the ctest entries that name them (tests/conformance/CMakeLists.txt).
INSTANTIATE_TEST_SUITE_P(Variants, Conformance,
                         ::testing::ValuesIn(UnderTest(true)), TestBackendName);

}  // namespace
}  // namespace dlock::test
