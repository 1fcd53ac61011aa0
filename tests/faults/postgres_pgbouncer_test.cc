// Copyright dlock authors. PostgreSQL behind PgBouncer (issue 19,
// docs/postgres.md "PgBouncer"). Session mode's advisory locks belong to a
// server session, which transaction pooling hands to other clients between
// transactions: a session-mode client refuses to start there, detected (on
// an idle pool and on a busy one), and works in session pooling. Lease mode
// works in transaction pooling without leaving session state (a statement
// timeout, prepared statements) on server connections that others get; its
// waiters in other clients are woken through a database alias pooled by
// session (listen_dbname), or else by their fallback poll. The conformance
// suite runs through PgBouncer too (conformance_postgres_pgbouncer_*).
#include <libpq-fe.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "pgbouncer.h"
#include "postgres_server.h"
#include "postgres_suite.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

constexpr char kAlias[] = "postgres_listen";

class PostgresPgBouncerTest : public PostgresSuite {
 protected:
  static void SetUpTestSuite() {
    PostgresSuite::SetUpTestSuite();
    if (server_ == nullptr) return;
    for (const std::string mode : {"transaction", "session"}) {
      absl::StatusOr<std::unique_ptr<PgBouncer>> bouncer =
          PgBouncer::Start({.server_port = server_->port(),
                            .pool_mode = mode,
                            .session_alias = kAlias});
      ASSERT_OK(bouncer);
      (mode == "transaction" ? transactions_ : sessions_) = bouncer->release();
    }
  }
  static void TearDownTestSuite() {
    delete transactions_;
    delete sessions_;
    PostgresSuite::TearDownTestSuite();
  }
  void SetUp() override {
    PostgresSuite::SetUp();
    ASSERT_NE(transactions_, nullptr);
    ASSERT_NE(sessions_, nullptr);
  }

  static std::string Through(const PgBouncer& bouncer, const std::string& mode,
                             const std::string& extra = "") {
    return bouncer.Uri("postgres",
                       absl::StrCat("namespace=bouncer&mode=", mode,
                                    extra.empty() ? "" : "&", extra));
  }

  // Session mode through transaction pooling: refused, saying why.
  static void ExpectSessionModeRefused(const std::string& what) {
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        Connect(Through(*transactions_, "session"));
    EXPECT_CODE(client, kFailedPrecondition);
    const std::string message(client.status().message());
    EXPECT_TRUE(absl::StrContains(message, "pool_mode = transaction"))
        << message;
    std::cout << "PGBOUNCER " << what << ": "
              << absl::StatusCodeToString(client.status().code()) << ": "
              << message << std::endl;
  }

  static inline PgBouncer* transactions_ = nullptr;
  static inline PgBouncer* sessions_ = nullptr;
};

TEST_F(PostgresPgBouncerTest, SessionModeRefusesTransactionPooling) {
  ExpectSessionModeRefused("session mode, transaction pooling");
}

// Other clients keep the pool busy with their own transactions, so that the
// server connection the probe's first connection used is not simply the
// one it gets back.
TEST_F(PostgresPgBouncerTest, SessionModeRefusesBusyTransactionPooling) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  std::atomic<int> rounds{0};
  for (int i = 0; i < 4; ++i) {
    busy.emplace_back([&, i] {
      absl::StatusOr<std::unique_ptr<LockClient>> client =
          Connect(Through(*transactions_, "lease"));
      ASSERT_OK(client);
      ASSERT_OK_AND_ASSIGN(auto lock,
                           (*client)->GetLock(absl::StrCat("busy-", i)));
      while (!stop) {
        absl::StatusOr<Hold> hold = lock->TryAcquire();
        if (hold.ok()) hold->Release().IgnoreError();
        ++rounds;
      }
    });
  }
  while (rounds < 20) absl::SleepFor(absl::Milliseconds(10));
  for (int i = 0; i < 5; ++i) {
    ExpectSessionModeRefused(absl::StrCat("busy transaction pooling, try ", i));
  }
  stop = true;
  for (std::thread& t : busy) t.join();
}

TEST_F(PostgresPgBouncerTest, SessionModeWorksInSessionPooling) {
  const std::string app = "pooled_session_holder";
  auto told = std::make_shared<absl::Notification>();
  ClientOptions options;
  options.on_lost = [told](const LockLostEvent&) {
    if (!told->HasBeenNotified()) told->Notify();
  };
  ASSERT_OK_AND_ASSIGN(auto holder, Connect(Through(*sessions_, "session",
                                                    "application_name=" + app),
                                            options));
  ASSERT_OK_AND_ASSIGN(auto other, Connect(Through(*sessions_, "session")));
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("session pooled"));
  ASSERT_OK_AND_ASSIGN(auto wanted, other->GetLock("session pooled"));
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire());
  EXPECT_TRUE(IsHeldByAnother(wanted->TryAcquire().status()));
  // The hold's server session ends: PgBouncer closes the client connection
  // it was pooled to, the holder is told, and the waiter takes over within
  // the grace (3s) and a poll, far sooner than the 30s lease.
  absl::StatusOr<int> ended = server_->TerminateBackends(app);
  ASSERT_OK(ended);
  EXPECT_GE(*ended, 1);
  const absl::Time ended_at = absl::Now();
  ASSERT_OK_AND_ASSIGN(Hold next, wanted->Acquire({.wait = absl::Seconds(20)}));
  EXPECT_TRUE(told->HasBeenNotified());
  EXPECT_EQ(hold.state(), LockState::kLost);
  EXPECT_LT(absl::Now() - ended_at, absl::Seconds(10));
  EXPECT_GT(next.fencing_token(), hold.fencing_token());
  EXPECT_OK(next.Release());
}

// Through transaction pooling the next client of a server connection
// finds it as it would without dlock: no statement_timeout of dlock's, no
// prepared statement.
TEST_F(PostgresPgBouncerTest, LeaseModeLeavesNoSessionStateBehind) {
  {
    ASSERT_OK_AND_ASSIGN(auto client,
                         Connect(Through(*transactions_, "lease",
                                         "operation_timeout=7s&pool_size=1")));
    ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("no traces"));
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire());
      EXPECT_OK(hold.Release());
    }
    ASSERT_OK(client->Close());
  }
  // psql through PgBouncer gets the server connections dlock used (the
  // pool reuses the last one first).
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::string> state = transactions_->Query(
        "SELECT current_setting('statement_timeout') || ' ' || "
        "(SELECT count(*) FROM pg_prepared_statements)");
    ASSERT_OK(state);
    EXPECT_EQ(*state, "0 0") << "statement_timeout, prepared statements";
  }
}

TEST_F(PostgresPgBouncerTest, LeaseModeWaiterWokenThroughTheListenAlias) {
  for (const bool alias : {true, false}) {
    SCOPED_TRACE(alias ? "listen_dbname" : "no listen_dbname");
    const std::string uri =
        Through(*transactions_, "lease",
                alias ? absl::StrCat("listen_dbname=", kAlias) : std::string());
    ClientOptions slow_poll;
    slow_poll.fallback_poll = absl::Seconds(3);
    ASSERT_OK_AND_ASSIGN(auto holder, Connect(uri));
    ASSERT_OK_AND_ASSIGN(auto waiter, Connect(uri, slow_poll));
    const std::string name = alias ? "woken" : "polled";
    ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock(name));
    ASSERT_OK_AND_ASSIGN(auto wanted, waiter->GetLock(name));
    ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire());
    absl::Time released_at;
    std::thread release([&] {
      absl::SleepFor(absl::Milliseconds(500));
      released_at = absl::Now();
      EXPECT_OK(hold.Release());
    });
    absl::StatusOr<Hold> got = wanted->Acquire({.wait = absl::Seconds(20)});
    const absl::Time got_at = absl::Now();
    release.join();
    ASSERT_OK(got);
    std::cout << "PGBOUNCER lease waiter in another client, "
              << (alias ? "listener on the session-pooled alias" : "no alias")
              << ": got the lock "
              << absl::FormatDuration(
                     absl::Trunc(got_at - released_at, absl::Milliseconds(1)))
              << " after the release (fallback poll 3s)" << std::endl;
    if (alias) {
      // NOTIFY reached it: well before the fallback poll.
      EXPECT_LT(got_at - released_at, absl::Seconds(1));
    } else {
      // Nothing announces the release: the waiter looks again at its poll.
      EXPECT_LT(got_at - released_at,
                slow_poll.fallback_poll + absl::Seconds(2));
    }
    EXPECT_OK(got->Release());
  }
}

TEST_F(PostgresPgBouncerTest, ListenAliasPooledByTransactionIsRefused) {
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect(Through(*transactions_, "lease", "listen_dbname=postgres"));
  EXPECT_CODE(client, kFailedPrecondition);
  std::cout << "PGBOUNCER listen_dbname pooled by transaction: "
            << client.status().message() << std::endl;
}

// PgBouncer before 1.21 puts a server connection back in the pool when its
// client leaves with pipelined queries unanswered: it takes the first
// ReadyForQuery for the end of them. The client it hands the connection to
// next reads the rest of those answers (and of its reset query) first. CI
// met it as "dlock_schema_version: connection lost" from a new client
// (conformance_postgres_pgbouncer_session, C23_WriterGetsInUnderAStreamOf
// Readers); a client that read on would have taken each answer for the one
// to its previous statement. A new connection tells the answer to its first
// query by a tag, ends a server session that answered another's, and
// connects again.
class PipelinedLeaver {
 public:
  // Through `bouncer`: a query answered at once, then one answered after
  // `sleep`, pipelined; leaves once the first answer came.
  static void Leave(const PgBouncer& bouncer, absl::Duration sleep) {
    PGconn* c = PQconnectdb(absl::StrCat("host=127.0.0.1 port=", bouncer.port(),
                                         " user=postgres dbname=postgres")
                                .c_str());
    ASSERT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
    const std::string slow = absl::StrCat(
        "SELECT pg_sleep(", absl::ToDoubleSeconds(sleep), "), 'not yours'");
    ASSERT_EQ(PQenterPipelineMode(c), 1);
    for (const char* sql : {"SELECT 'not yours either'", slow.c_str()}) {
      ASSERT_EQ(
          PQsendQueryParams(c, sql, 0, nullptr, nullptr, nullptr, nullptr, 0),
          1);
      ASSERT_EQ(PQpipelineSync(c), 1);
    }
    while (PGresult* r = PQgetResult(c)) PQclear(r);  // the first query's
    PGresult* sync = PQgetResult(c);
    EXPECT_EQ(PQresultStatus(sync), PGRES_PIPELINE_SYNC);
    PQclear(sync);
    PQfinish(c);
  }
};

TEST_F(PostgresPgBouncerTest, NewClientDropsServerConnectionAnsweringAnother) {
  // Two server connections: the one the leaver leaves, which the new client
  // waits for and gets as soon as PgBouncer takes it back, and one for the
  // client's second connection, held by `blocker` until then.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PgBouncer> bouncer,
                       PgBouncer::Start({.server_port = server_->port(),
                                         .pool_mode = "session",
                                         .pool_size = 2}));
  ASSERT_OK_AND_ASSIGN(auto direct, Connect(server_->Uri("bouncer")));
  constexpr absl::Duration kSleep = absl::Milliseconds(500);
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    std::thread blocker([&] {
      // A session of its own until the leaver's is back in the pool.
      EXPECT_OK(bouncer->Query(absl::StrCat(
          "SELECT pg_sleep(", absl::ToDoubleSeconds(kSleep * 1.5), ")")));
    });
    absl::SleepFor(absl::Milliseconds(100));  // the blocker has its session
    PipelinedLeaver::Leave(*bouncer, kSleep);
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        Connect(bouncer->Uri("postgres", "namespace=bouncer&mode=lease"));
    blocker.join();
    ASSERT_OK(client);
    // Its answers are its own: what it holds is what the server says.
    ASSERT_OK_AND_ASSIGN(auto lock, (*client)->GetLock("left answers"));
    ASSERT_OK_AND_ASSIGN(Hold hold, lock->TryAcquire());
    ASSERT_OK_AND_ASSIGN(LockInfo seen,
                         direct->Admin().Inspect("left answers"));
    EXPECT_TRUE(seen.locked);
    EXPECT_EQ(seen.fencing_token, hold.fencing_token());
    EXPECT_OK(hold.Release());
    ASSERT_OK_AND_ASSIGN(seen, direct->Admin().Inspect("left answers"));
    EXPECT_FALSE(seen.locked);
  }
}

}  // namespace
}  // namespace dlock::test
