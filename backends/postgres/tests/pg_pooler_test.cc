// Copyright dlock authors. The probe that tells PgBouncer's pooling modes
// apart (pg_pooler.h) against a real PgBouncer, with a FaultProxy between
// the client and PgBouncer to make one answer slow.
#include "pg_pooler.h"

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "fault_proxy.h"
#include "gtest/gtest.h"
#include "parse_pg_options.h"
#include "pgbouncer.h"
#include "postgres_server.h"
#include "status_testing.h"

namespace dlock::postgres {
namespace {

using ::dlock::test::Direction;
using ::dlock::test::Fault;
using ::dlock::test::FaultProxy;
using ::dlock::test::PgBouncer;
using ::dlock::test::PostgresServer;

// Bytes the proxy read from the server for connection `id` (0 if closed).
uint64_t RepliesOf(const FaultProxy& proxy, uint64_t id) {
  for (const auto& connection : proxy.Connections()) {
    if (connection.id == id) return connection.reply_bytes.received;
  }
  return 0;
}

// In session pooling the probe's connection keeps its server session, but
// on a loaded machine its answer may come late while the second connection
// holds its transaction. A late answer is not a moved session: it used to
// be taken for one, and a session-mode client (or the listener of
// listen_dbname) refused to start behind a session pool.
TEST(PgPoolerTest, ALateAnswerInSessionPoolingIsNotTransactionPooling) {
  absl::StatusOr<std::unique_ptr<PostgresServer>> server =
      PostgresServer::Start();
  ASSERT_OK(server);
  absl::StatusOr<std::unique_ptr<PgBouncer>> bouncer = PgBouncer::Start(
      {.server_port = (*server)->port(), .pool_mode = "session"});
  ASSERT_OK(bouncer);
  FaultProxy proxy;
  ASSERT_OK(proxy.Start("127.0.0.1", (*bouncer)->port()));
  const std::string uri = absl::StrCat(
      "postgres://postgres@127.0.0.1:", proxy.port(), "/postgres?mode=session");
  absl::StatusOr<PgOptions> options = Parse(uri);
  ASSERT_OK(options);
  absl::StatusOr<std::unique_ptr<PgConn>> conn = PgConn::Open(*options);
  ASSERT_OK(conn);
  ASSERT_FALSE((*conn)->direct());

  // Once the probe opens its second connection, the first one's next answer
  // (its process id, asked while the second holds a transaction) comes
  // 1.5 s late; later answers come at once.
  std::thread slow_answer([&proxy] {
    ASSERT_OK(proxy.WaitForAccepted(2, absl::Seconds(30)));
    const uint64_t before = RepliesOf(proxy, 1);
    ASSERT_OK(proxy.SetConnectionFault(1, Direction::kReplies,
                                       Fault::Delay(absl::Milliseconds(1500))));
    // (Connections() takes the proxy's lock: not from a WaitFor callback.)
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (RepliesOf(proxy, 1) == before && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_GT(RepliesOf(proxy, 1), before) << "the late answer never came";
    ASSERT_OK(proxy.SetConnectionFault(1, Direction::kReplies, Fault::Pass()));
  });
  absl::StatusOr<Pooling> pooling = DetectPooling(*options, **conn);
  slow_answer.join();
  ASSERT_OK(pooling);
  EXPECT_EQ(*pooling, Pooling::kSessions);
}

}  // namespace
}  // namespace dlock::postgres
