// Copyright dlock authors. What one acquire statement's answer means to the
// waiting loop (ToAttempt, pg_common.h), for both modes, on results built
// with libpq's own constructors (no server needed).
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pg_common.h"

namespace dlock::postgres {
namespace {

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

// A result with the acquire functions' columns and these rows, as text.
Result Answer(const std::vector<std::vector<std::string>>& rows) {
  Result r(PQmakeEmptyPGresult(nullptr, PGRES_TUPLES_OK));
  char got[] = "got", holds[] = "holds", token[] = "token", left[] = "left";
  PGresAttDesc columns[4] = {};
  char* names[4] = {got, holds, token, left};
  for (int i = 0; i < 4; ++i) columns[i].name = names[i];
  EXPECT_TRUE(PQsetResultAttrs(r.get(), 4, columns));
  for (size_t row = 0; row < rows.size(); ++row) {
    for (int col = 0; col < 4; ++col) {
      std::string value = rows[row][col];
      EXPECT_TRUE(PQsetvalue(r.get(), static_cast<int>(row), col, value.data(),
                             static_cast<int>(value.size())));
    }
  }
  return r;
}

TEST(PostgresAttempt, AGrantCarriesTheTokenAndTheCount) {
  const Attempt attempt = ToAttempt(Answer({{"t", "2", "17", "0"}}).get());
  ASSERT_TRUE(attempt.acquired.has_value());
  EXPECT_EQ(attempt.acquired->fencing_token, 17u);
  EXPECT_EQ(attempt.acquired->hold_count, 2);
}

TEST(PostgresAttempt, ARefusalSaysWhenTheHolderMayEnd) {
  const Attempt attempt = ToAttempt(Answer({{"f", "0", "0", "250"}}).get());
  EXPECT_FALSE(attempt.acquired.has_value());
  EXPECT_EQ(attempt.holder_lease_left, absl::Milliseconds(250));
}

// No row names no holder: the waiter waits for a wake-up or the fallback
// poll. (Lease mode used to answer zero, which made a waiter look again at
// once, every millisecond for as long as the server answered so: C9.)
TEST(PostgresAttempt, NoRowSaysNothingOfAHolder) {
  const Attempt attempt = ToAttempt(Answer({}).get());
  EXPECT_FALSE(attempt.acquired.has_value());
  EXPECT_EQ(attempt.holder_lease_left, absl::InfiniteDuration());
}

}  // namespace
}  // namespace dlock::postgres
