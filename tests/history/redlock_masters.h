// Copyright dlock authors. What the Redlock history tests share: a fresh
// namespace per scenario, and one client's view of the registry's masters
// through a FaultProxy in front of each.
#ifndef DLOCK_TESTS_HISTORY_REDLOCK_MASTERS_H_
#define DLOCK_TESTS_HISTORY_REDLOCK_MASTERS_H_

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "fault_proxy.h"
#include "redis_server.h"

namespace dlock::test {

inline std::string FreshNamespace(absl::string_view scenario) {
  std::random_device random;
  return absl::StrCat("rl-", scenario, "-", random() % 1000000000);
}

// One client's view of the masters: a FaultProxy in front of each.
class ProxiedMasters {
 public:
  static absl::StatusOr<std::unique_ptr<ProxiedMasters>> Start(
      RedisGroup& group) {
    auto out = std::unique_ptr<ProxiedMasters>(new ProxiedMasters(group));
    for (int i = 0; i < group.size(); ++i) {
      auto proxy = std::make_unique<FaultProxy>();
      if (absl::Status s = proxy->Start("127.0.0.1", group.server(i).port());
          !s.ok()) {
        return s;
      }
      out->ports_.push_back(proxy->port());
      out->proxies_.push_back(std::move(proxy));
    }
    return out;
  }

  FaultProxy& proxy(int master) { return *proxies_[master]; }

  std::string Uri(const std::string& ns, absl::string_view params = "") const {
    return absl::StrCat("redlock://", group_.Hosts(ports_), "?namespace=", ns,
                        params.empty() ? "" : "&", params);
  }

 private:
  explicit ProxiedMasters(RedisGroup& group) : group_(group) {}
  RedisGroup& group_;
  std::vector<int> ports_;
  std::vector<std::unique_ptr<FaultProxy>> proxies_;
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_HISTORY_REDLOCK_MASTERS_H_
