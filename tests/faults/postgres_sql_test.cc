// Copyright dlock authors. What is particular to the PostgreSQL backend: a
// name written as an SQL injection is only a name (every statement is
// parameterized), option checking, errors that name the endpoint and never
// the password, and a stuck server that costs a caller no more than the
// statement timeout.
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "postgres_server.h"
#include "postgres_suite.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

class PostgresSqlTest : public PostgresSuite {};

constexpr char kInjection[] = "x'); DROP TABLE t; --";

// The lock table is called `t` here, so an injected DROP TABLE t would
// remove it and every later statement would fail.
TEST_F(PostgresSqlTest, InjectionNameIsOnlyAName) {
  for (const std::string mode : {"lease", "session"}) {
    SCOPED_TRACE(mode);
    absl::StatusOr<std::unique_ptr<LockClient>> a =
        Connect(server_->Uri("inject", "table=t&mode=" + mode));
    ASSERT_OK(a);
    absl::StatusOr<std::unique_ptr<LockClient>> b =
        Connect(server_->Uri("inject", "table=t&mode=" + mode));
    ASSERT_OK(b);
    auto lock = *(*a)->GetLock(kInjection);
    auto same = *(*b)->GetLock(kInjection);
    auto plain = *(*b)->GetLock("x");
    absl::StatusOr<Hold> got = lock->Acquire();
    ASSERT_OK(got);
    EXPECT_EQ(same->TryAcquire().status().code(),
              absl::StatusCode::kDeadlineExceeded);
    absl::StatusOr<Hold> other = plain->TryAcquire();  // no collision
    ASSERT_OK(other);
    absl::StatusOr<std::vector<LockInfo>> listed = (*b)->Admin().List("x'");
    ASSERT_OK(listed);
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ((*listed)[0].name, kInjection);
    EXPECT_OK(got->Release());
    EXPECT_OK(other->Release());
    absl::StatusOr<Hold> after = same->TryAcquire();
    ASSERT_OK(after);
    EXPECT_GT(after->fencing_token(), got->fencing_token());
    EXPECT_OK(after->Release());
    EXPECT_OK((*b)->Admin().ForceUnlock(same->name()));
  }
}

// The watchdog renews all of a client's due holds in one statement whose
// names travel as an array parameter: names with quotes, backslashes, commas,
// braces and non-Latin letters must come through it intact.
TEST_F(PostgresSqlTest, BatchedRenewalKeepsOddlyNamedLocks) {
  const std::vector<std::string> names = {
      kInjection,
      "a\\b",
      "\"quoted\"",
      "{braces}",
      "comma,separated",
      "NULL",
      "sp ace",
      "\xd0\xb7\xd0\xb0\xd0\xbc\xd0\xbe\xd0\xba",
      "x",
      std::string(512, 'n')};
  for (const std::string mode : {"lease", "session"}) {
    SCOPED_TRACE(mode);
    ClientOptions options;
    options.watchdog_lease = absl::Milliseconds(600);
    int lost = 0;
    absl::Mutex mu;
    options.on_lost = [&](const LockLostEvent&) {
      absl::MutexLock lock(&mu);
      ++lost;
    };
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        Connect(server_->Uri("batch_" + mode, "mode=" + mode), options);
    ASSERT_OK(client);
    std::vector<std::unique_ptr<DistributedLock>> locks;
    std::vector<Hold> holds;
    for (const std::string& name : names) {
      locks.push_back(*(*client)->GetLock(name));
      absl::StatusOr<Hold> hold = locks.back()->Acquire();
      ASSERT_OK(hold) << name;
      holds.push_back(*std::move(hold));
    }
    absl::SleepFor(absl::Seconds(2));  // ten watchdog rounds, three leases
    for (size_t i = 0; i < locks.size(); ++i) {
      const std::unique_ptr<DistributedLock>& lock = locks[i];
      absl::StatusOr<LockInfo> info = (*client)->Admin().Inspect(lock->name());
      ASSERT_OK(info);
      EXPECT_TRUE(info->locked) << lock->name();
      EXPECT_EQ(holds[i].state(), LockState::kHeld) << lock->name();
      EXPECT_OK(holds[i].Release()) << lock->name();
    }
    absl::MutexLock lock(&mu);
    EXPECT_EQ(lost, 0);
  }
}

TEST_F(PostgresSqlTest, BothSchemesAndLibpqParametersWork) {
  const std::string base = absl::StrCat("127.0.0.1:", server_->port(),
                                        "/postgres?namespace=schemes");
  for (const std::string scheme : {"postgres", "postgresql"}) {
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(absl::StrCat(
        scheme, "://postgres@", base,
        "&sslmode=disable&application_name=dlock-test&connect_timeout=3"
        "&pool_size=2&statement_timeout=2s"));
    ASSERT_OK(client) << scheme;
    auto lock = *(*client)->GetLock("scheme");
    absl::StatusOr<Hold> got = lock->TryAcquire();
    EXPECT_OK(got);
    if (got.ok()) {
      EXPECT_OK(got->Release());
    }
  }
}

// libpq's meaning throughout: no authority, the unix socket directory and
// the port as parameters.
TEST_F(PostgresSqlTest, UnixSocketThroughLibpqParameters) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(absl::StrCat(
      "postgresql:///postgres?host=", server_->socket_dir(),
      "&port=", server_->port(), "&user=postgres&namespace=socket"));
  ASSERT_OK(client);
  EXPECT_TRUE(absl::StrContains((*client)->endpoint(), "host="));
  auto lock = *(*client)->GetLock("over a unix socket");
  absl::StatusOr<Hold> got = lock->TryAcquire();
  EXPECT_OK(got);
  if (got.ok()) {
    EXPECT_OK(got->Release());
  }
}

TEST_F(PostgresSqlTest, BadOptionsAreInvalidArgumentNamingTheKey) {
  struct Case {
    std::string query;
    std::string named;
  };
  for (const Case& c : std::vector<Case>{
           {"bogus=1", "bogus"},
           {"table=Locks", "table"},
           {"table=t%3Bdrop", "table"},
           {"table=1t", "table"},
           {"mode=advisory", "mode"},
           {"pool_size=0", "pool_size"},
           {"statement_timeout=forever", "statement_timeout"},
           {"replication=database", "replication"},
           {"dbname=other", "dbname"},
       }) {
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        Connect(server_->Uri("", c.query));
    ASSERT_FALSE(client.ok()) << c.query;
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument)
        << c.query << ": " << client.status();
    EXPECT_TRUE(absl::StrContains(client.status().message(), c.named))
        << client.status();
  }
}

TEST_F(PostgresSqlTest, UnavailableNamesTheEndpointNeverThePassword) {
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect("postgres://someone:s3cret-pw@127.0.0.1:1/postgres");
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable)
      << client.status();
  EXPECT_TRUE(absl::StrContains(client.status().message(), "127.0.0.1:1"))
      << client.status();
  EXPECT_FALSE(absl::StrContains(client.status().message(), "s3cret"))
      << client.status();
  // The wrong password for a user that does not exist: still no password.
  client = Connect(absl::StrCat(
      "postgres://nobody:s3cret-pw@127.0.0.1:", server_->port(), "/postgres"));
  ASSERT_FALSE(client.ok());
  EXPECT_FALSE(absl::StrContains(client.status().message(), "s3cret"))
      << client.status();
}

// A server that stops answering (SIGSTOP) costs a call the statement timeout
// plus a second, never more; afterwards the client recovers by itself. (The
// abandoned statement may still run when the server resumes: a hold taken
// that way is unknown to the client and ends with its lease, which is why
// each mode uses a namespace of its own here.)
TEST_F(PostgresSqlTest, StuckServerCostsAtMostTheStatementTimeout) {
  for (const std::string mode : {"lease", "session"}) {
    SCOPED_TRACE(mode);
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(
        server_->Uri("stuck_" + mode, "statement_timeout=500ms&mode=" + mode));
    ASSERT_OK(client);
    auto lock = *(*client)->GetLock("stuck");
    absl::StatusOr<Hold> first = lock->TryAcquire();
    ASSERT_OK(first);
    ASSERT_OK(first->Release());

    server_->Pause();
    const absl::Time start = absl::Now();
    absl::StatusOr<Hold> got = lock->TryAcquire();
    const absl::Duration took = absl::Now() - start;
    server_->Resume();
    EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable)
        << got.status();
    EXPECT_LT(took, absl::Seconds(3));

    absl::StatusOr<Hold> later = absl::UnknownError("not tried");
    for (int i = 0; i < 50 && !later.ok(); ++i) {
      later = lock->TryAcquire();
      if (!later.ok()) absl::SleepFor(absl::Milliseconds(100));
    }
    ASSERT_OK(later);
    EXPECT_OK(later->Release());
  }
}

}  // namespace
}  // namespace dlock::test
