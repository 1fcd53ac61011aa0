// Copyright dlock authors. A GoogleTest suite whose tests share one
// throwaway etcd (etcd_server.h): started with Derived::ServerOptions()
// before the first test, stopped after the last.
#ifndef DLOCK_INTEGRATION_ETCD_SERVER_SUITE_H_
#define DLOCK_INTEGRATION_ETCD_SERVER_SUITE_H_

#include <memory>

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
  void SetUp() override { ASSERT_NE(server_, nullptr) << "etcd did not start"; }

  static inline EtcdServer* server_ = nullptr;
};

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_ETCD_SERVER_SUITE_H_
