// Copyright dlock authors. What the Redlock tests share: a group of masters,
// and fault proxies in front of some of them.
#ifndef DLOCK_BACKENDS_REDIS_TESTS_REDLOCK_TEST_UTIL_H_
#define DLOCK_BACKENDS_REDIS_TESTS_REDLOCK_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "fault_proxy.h"
#include "gtest/gtest.h"
#include "redis_server.h"
#include "status_testing.h"

namespace dlock::test {

// `masters` fresh masters, taking only TLS with `tls`; null (and a test
// failure) when they do not start.
inline std::unique_ptr<RedisGroup> StartGroup(int masters, bool tls = false) {
  absl::StatusOr<std::unique_ptr<RedisGroup>> group =
      RedisGroup::Start(masters, {.tls = tls});
  EXPECT_OK(group);
  return group.ok() ? *std::move(group) : nullptr;
}

// Starts proxies[i] in front of master i and returns their ports, for
// RedisGroup::Hosts(): the masters after them are reached directly.
inline std::vector<int> StartProxies(RedisGroup& group,
                                     absl::Span<FaultProxy> proxies) {
  std::vector<int> ports;
  for (size_t i = 0; i < proxies.size(); ++i) {
    absl::Status started =
        proxies[i].Start("127.0.0.1", group.server(static_cast<int>(i)).port());
    EXPECT_OK(started);
    ports.push_back(proxies[i].port());
  }
  return ports;
}

// redlock:// over the group's masters (redlocks://, trusting the test CA,
// for masters over TLS), `ports[i]` instead of master i's own port where
// given and not 0, with `query`.
inline std::string RedlockUri(const RedisGroup& group,
                              const std::vector<int>& ports,
                              const std::string& query) {
  std::string uri = absl::StrCat(group.tls() ? "redlocks://" : "redlock://",
                                 group.Hosts(ports), "?", query);
  if (group.tls()) {
    absl::StatusOr<std::string> trust = TestTlsQuery(false);
    EXPECT_OK(trust);
    absl::StrAppend(&uri, "&", trust.value_or(""));
  }
  return uri;
}

}  // namespace dlock::test

#endif  // DLOCK_BACKENDS_REDIS_TESTS_REDLOCK_TEST_UTIL_H_
