// Copyright dlock authors. `dlock setup` (docs/cli.md, docs/postgres.md
// "Least privilege"): an administrator creates PostgreSQL's lock tables and
// grants an application user what dlock needs; that user may not create
// tables, and works once setup ran. One ctest entry: one server.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "postgres_server.h"
#include "status_testing.h"
#include "test_util.h"

namespace dlock {
namespace {

using test::Dlock;
using test::Result;
using test::RunProcess;
using ::testing::HasSubstr;

class CliPostgresSetupTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<test::PostgresServer>> started =
        test::PostgresServer::Start();
    ASSERT_OK(started);
    server_ = started->release();
    ASSERT_OK(server_->Psql("CREATE ROLE app_user LOGIN;"));
  }
  static void TearDownTestSuite() { delete server_; }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  std::string As(const std::string& user) const {
    return absl::StrCat("postgres://", user, "@127.0.0.1:", server_->port(),
                        "/postgres?table=app_locks");
  }

  static inline test::PostgresServer* server_ = nullptr;
};

TEST_F(CliPostgresSetupTest, AdministratorSetsUpForAUserThatMayNotCreate) {
  const Result refused =
      RunProcess(Dlock({"run", "--backend", As("app_user"), "--wait", "0",
                        "job", "--", "true"}));
  // A right refused (42501): 77, the code a retry loop does not retry.
  EXPECT_EQ(refused.code, 77) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("permission denied for schema public"));
  EXPECT_THAT(refused.err, HasSubstr("dlock setup"));

  const Result setup = RunProcess(
      Dlock({"setup", "--backend", As("postgres"), "--grant-to", "app_user"}));
  EXPECT_EQ(setup.code, 0) << setup.err;
  EXPECT_THAT(setup.out, HasSubstr("ready"));
  EXPECT_THAT(setup.out, HasSubstr("app_user has what dlock needs"));

  const Result ran = RunProcess(Dlock({"run", "--backend", As("app_user"),
                                       "--wait", "0", "job", "--", "true"}));
  EXPECT_EQ(ran.code, 0) << ran.err;
  // Setup again is harmless: the schema is current, the grants are given.
  const Result again = RunProcess(
      Dlock({"setup", "--backend", As("postgres"), "--grant-to", "app_user"}));
  EXPECT_EQ(again.code, 0) << again.err;
}

TEST_F(CliPostgresSetupTest, GrantToAnUnknownRoleFails) {
  const Result setup = RunProcess(Dlock(
      {"setup", "--backend", As("postgres"), "--grant-to", "no such role"}));
  EXPECT_NE(setup.code, 0);
  EXPECT_THAT(setup.err, HasSubstr("role \"no such role\" does not exist"));
}

}  // namespace
}  // namespace dlock
