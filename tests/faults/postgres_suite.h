// Copyright dlock authors. One PostgreSQL server for a whole fault-test
// binary; a server that does not start fails every test, never skips it.
#ifndef DLOCK_TESTS_FAULTS_POSTGRES_SUITE_H_
#define DLOCK_TESTS_FAULTS_POSTGRES_SUITE_H_

#include <memory>

#include "gtest/gtest.h"
#include "postgres_server.h"
#include "status_testing.h"

namespace dlock::test {

class PostgresSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<PostgresServer>> started =
        PostgresServer::Start();
    ASSERT_OK(started);
    server_ = started->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "postgres did not start";
  }

  static inline PostgresServer* server_ = nullptr;
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_FAULTS_POSTGRES_SUITE_H_
