// Copyright dlock authors. How postgres:// maps the common options onto
// libpq and its own statement timeout (no server needed).
#include <memory>
#include <string>

#include "dlock/backend/backend.h"
#include "dlock/uri.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parse_pg_options.h"
#include "pg_options.h"
#include "status_testing.h"

namespace dlock::postgres {
namespace {

using ::testing::HasSubstr;

// The value of libpq keyword `key`, or "(unset)".
std::string Libpq(const PgOptions& options, const std::string& key) {
  for (size_t i = 0; i < options.keywords.size(); ++i) {
    if (options.keywords[i] == key) return options.values[i];
  }
  return "(unset)";
}

// libpq takes whole seconds, and 0 would mean forever: rounded up, never 0.
TEST(PostgresOptions, ConnectTimeoutBecomesWholeSecondsRoundedUp) {
  const struct {
    const char* option;
    const char* libpq;
  } cases[] = {
      {"", "5"},  // dlock's default: libpq's own waits forever
      {"&connect_timeout=1ms", "1"},
      {"&connect_timeout=300ms", "1"},
      {"&connect_timeout=1s", "1"},
      {"&connect_timeout=1500ms", "2"},
      {"&connect_timeout=2s", "2"},
      {"&connect_timeout=1m", "60"},
      {"&connect_timeout=7", "7"},  // libpq's form
  };
  for (const auto& c : cases) {
    absl::StatusOr<PgOptions> options =
        Parse(absl::StrCat("postgres://u@h:5432/db?namespace=n", c.option));
    ASSERT_OK(options) << c.option;
    EXPECT_EQ(Libpq(*options, "connect_timeout"), c.libpq) << c.option;
  }
}

// Several hosts are a primary and its standbys: dlock wants the one that
// takes writes, unless the URI says otherwise.
TEST(PostgresOptions, HostListAsksForTheReadWriteServer) {
  const struct {
    const char* uri;
    const char* attrs;
  } cases[] = {
      {"postgres://a:5432,b:5432/db", "read-write"},
      {"postgres://a,b/db", "read-write"},
      {"postgres:///db?host=a,b", "read-write"},
      {"postgres://a:5432/db", "(unset)"},
      {"postgres://a,b/db?target_session_attrs=any", "any"},
      {"postgres://a,b/db?target_session_attrs=prefer-standby",
       "prefer-standby"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<PgOptions> options = Parse(c.uri);
    ASSERT_OK(options) << c.uri;
    EXPECT_EQ(Libpq(*options, "target_session_attrs"), c.attrs) << c.uri;
  }
}

TEST(PostgresOptions, SetupAndListenOptions) {
  absl::StatusOr<PgOptions> options =
      Parse("postgres://h/db?grant_to=app%20user&listen_dbname=db_listen");
  ASSERT_OK(options);
  EXPECT_EQ(options->grant_to, "app user");
  EXPECT_EQ(options->listen_dbname, "db_listen");
  EXPECT_EQ(Libpq(WithDbname(*options, "db_listen"), "dbname"), "db_listen");
  EXPECT_EQ(Libpq(*options, "dbname"), "db");
  EXPECT_FALSE(Parse("postgres://h/db?grant_to=").ok());
}

TEST(PostgresOptions, OperationTimeoutIsTheStatementTimeout) {
  absl::StatusOr<PgOptions> options = Parse("postgres://h/db");
  ASSERT_OK(options);
  EXPECT_EQ(options->statement_timeout, absl::Seconds(5));
  for (const char* given :
       {"operation_timeout=750ms", "statement_timeout=750ms",
        "operation_timeout=750ms&statement_timeout=750ms"}) {
    options = Parse(absl::StrCat("postgres://h/db?", given));
    ASSERT_OK(options) << given;
    EXPECT_EQ(options->statement_timeout, absl::Milliseconds(750)) << given;
    // dlock's option, not a libpq parameter.
    EXPECT_EQ(Libpq(*options, "statement_timeout"), "(unset)");
  }
  // The sweeper's bound applies whichever name gave it.
  for (const char* given : {"operation_timeout=2m", "statement_timeout=5ms"}) {
    options = Parse(absl::StrCat("postgres://h/db?", given));
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument)
        << given;
    EXPECT_THAT(options.status().message(), HasSubstr("from 10ms to 1m"));
  }
}

}  // namespace
}  // namespace dlock::postgres
