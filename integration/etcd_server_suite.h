// Copyright dlock authors. A GoogleTest suite whose tests share one
// throwaway etcd (etcd_server.h): started with Derived::ServerOptions()
// before the first test, stopped after the last. Each test gets a lock
// namespace of its own, named after it.
#ifndef DLOCK_INTEGRATION_ETCD_SERVER_SUITE_H_
#define DLOCK_INTEGRATION_ETCD_SERVER_SUITE_H_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "etcd_server.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock::test {

template <typename Derived>
class EtcdServerSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<EtcdServer>> server =
        EtcdServer::Start(Derived::ServerOptions());
    ASSERT_OK(server);
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "etcd did not start";
    ns_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  // Every member, directly, in the test's namespace.
  std::string Uri() const { return server_->Uri(ns_); }

  // Every `"lease":N` of etcdctl's JSON answer to `args`.
  static absl::StatusOr<std::vector<int64_t>> LeaseFields(
      const std::vector<std::string>& args) {
    absl::StatusOr<std::string> json = server_->Etcdctl(args);
    if (!json.ok()) return json.status();
    std::vector<int64_t> leases;
    static const std::regex kLease("\"lease\":([0-9]+)");
    for (std::sregex_iterator it(json->begin(), json->end(), kLease), end;
         it != end; ++it) {
      leases.push_back(std::strtoll((*it)[1].str().c_str(), nullptr, 10));
    }
    return leases;
  }

  static inline EtcdServer* server_ = nullptr;
  std::string ns_;
};

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_ETCD_SERVER_SUITE_H_
