// Copyright dlock authors. What the Redlock tests share: a group of masters,
// and fault proxies in front of some of them.
#ifndef DLOCK_BACKENDS_REDIS_TESTS_REDLOCK_TEST_UTIL_H_
#define DLOCK_BACKENDS_REDIS_TESTS_REDLOCK_TEST_UTIL_H_

#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "fault_proxy.h"
#include "gtest/gtest.h"
#include "redis_server.h"

namespace dlock::testing {

// `masters` fresh masters; null (and a test failure) when they do not start.
inline std::unique_ptr<RedisGroup> StartGroup(int masters) {
  absl::StatusOr<std::unique_ptr<RedisGroup>> group =
      RedisGroup::Start(masters);
  EXPECT_TRUE(group.ok()) << group.status();
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
    EXPECT_TRUE(started.ok()) << started;
    ports.push_back(proxies[i].port());
  }
  return ports;
}

}  // namespace dlock::testing

#endif  // DLOCK_BACKENDS_REDIS_TESTS_REDLOCK_TEST_UTIL_H_
