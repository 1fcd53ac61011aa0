// Copyright dlock authors. A lock table made by dlock 0.1 (schema version 1)
// keeps working: the first client of this version migrates it in place (to
// version 8, through the columns of versions 2 to 6, version 7's
// semaphore holders and version 8's read-write locks), and
// a session-mode row held by a 0.1 client, which believed in its hold until
// its lease ended, is not taken over before then.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "postgres_server.h"
#include "postgres_suite.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

class PostgresSchemaTest : public PostgresSuite {};

// What dlock 0.1 created (its session functions reduced to the one whose
// signature changed), and one row a 0.1 session-mode client holds for a
// minute through a session that is gone now.
constexpr char kVersion1[] = R"sql(
CREATE TABLE old_locks_meta (version integer NOT NULL);
INSERT INTO old_locks_meta VALUES (1);
CREATE SEQUENCE old_locks_fencing AS bigint;
CREATE TABLE old_locks (
  namespace text NOT NULL, name text NOT NULL, owner text NOT NULL,
  holds bigint NOT NULL, fencing_token bigint NOT NULL,
  kept_lease_ms bigint NOT NULL, expires_at timestamptz NOT NULL,
  since timestamptz NOT NULL, session_key bigint,
  wanted boolean NOT NULL DEFAULT false,
  PRIMARY KEY (namespace, name)) WITH (fillfactor = 70);
CREATE FUNCTION "old_locks_s_acquire"(p_ns text, p_name text, p_owner text,
    p_lease_ms bigint, p_have boolean)
RETURNS TABLE (o_got boolean, o_holds bigint, o_token bigint, o_left bigint)
LANGUAGE sql AS $$ SELECT true, 1::bigint, 1::bigint, 0::bigint $$;
INSERT INTO old_locks VALUES ('migrate', 'held by 0.1', 'a 0.1 owner', 1,
  nextval('old_locks_fencing'), 60000, clock_timestamp() + interval '60s',
  clock_timestamp(), hashtextextended('migrate/held by 0.1', 0), false);
)sql";

TEST_F(PostgresSchemaTest, Version1TableIsMigratedAndKeepsWorking) {
  ASSERT_OK(server_->Psql(kVersion1));
  const std::string session =
      server_->Uri("migrate", "table=old_locks&mode=session");
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(session);
  ASSERT_OK(client);

  absl::StatusOr<std::string> version =
      server_->Psql("SELECT max(version) FROM old_locks_meta;");
  ASSERT_OK(version);
  EXPECT_EQ(*version, "8");
  absl::StatusOr<std::string> columns = server_->Psql(
      "SELECT string_agg(column_name, ',' ORDER BY column_name) FROM "
      "information_schema.columns WHERE table_name = 'old_locks' AND "
      "column_name IN ('dead_since', 'grace_ms');");
  ASSERT_OK(columns);
  EXPECT_EQ(*columns, "dead_since,grace_ms");
  // The 0.1 acquire function, which took over dead sessions at once, is
  // gone: a 0.1 client left running fails rather than break a new holder.
  absl::StatusOr<std::string> old_functions = server_->Psql(
      "SELECT count(*) FROM pg_proc WHERE proname = 'old_locks_s_acquire' "
      "AND pronargs = 5;");
  ASSERT_OK(old_functions);
  EXPECT_EQ(*old_functions, "0");
  // Version 5: the release function takes the keep after release (its last
  // parameter); the older one without it is gone.
  absl::StatusOr<std::string> releases = server_->Psql(
      "SELECT string_agg(pronargs::text, ',') FROM pg_proc WHERE proname = "
      "'old_locks_s_release';");
  ASSERT_OK(releases);
  EXPECT_EQ(*releases, "8");

  // Both modes work on the migrated table.
  for (const std::string mode : {"lease", "session"}) {
    SCOPED_TRACE(mode);
    absl::StatusOr<std::unique_ptr<LockClient>> c =
        Connect(server_->Uri("migrate", "table=old_locks&mode=" + mode));
    ASSERT_OK(c);
    auto lock = *(*c)->GetLock("after the migration " + mode);
    absl::StatusOr<Hold> got = lock->Acquire();
    ASSERT_OK(got);
    EXPECT_EQ(got->state(), LockState::kHeld);
    EXPECT_OK(got->Release());
    // Version 7: semaphores (their holders table and functions).
    auto sem = *(*c)->GetSemaphore("after the migration " + mode, 2);
    absl::StatusOr<Permit> permits = sem->Acquire(2, AcquireOptions());
    ASSERT_OK(permits);
    EXPECT_EQ(permits->slots(), (std::vector<int64_t>{0, 1}));
    EXPECT_OK(permits->Release());
    EXPECT_TRUE((*c)->traits().read_write_locks) << mode;
    // Version 8: read-write locks.
    auto rw = *(*c)->GetReadWriteLock("after the migration " + mode);
    absl::StatusOr<Hold> read = rw->AcquireRead(AcquireOptions());
    ASSERT_OK(read);
    absl::StatusOr<std::unique_ptr<LockClient>> writer =
        Connect(server_->Uri("migrate", "table=old_locks&mode=" + mode));
    ASSERT_OK(writer);
    EXPECT_TRUE(
        IsHeldByAnother((*(*writer)->GetLock("after the migration " + mode))
                            ->TryAcquire()
                            .status()));
    EXPECT_OK(read->Release());
  }

  // The 0.1 holder's session is gone, but it knew no grace: the row waits
  // for its lease, well past the grace of this client.
  auto old_row = *(*client)->GetLock("held by 0.1");
  AcquireOptions wait;
  wait.wait = absl::Seconds(5);  // the default grace (3s) and a poll
  EXPECT_EQ(old_row->Acquire(wait).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

// The upgrade from the version before (7, semaphores and elections) to 8
// (read-write locks): a version-7 table, marked so, gets the read-write
// functions and keeps its holds.
TEST_F(PostgresSchemaTest, Version7TableGainsReadWriteLocks) {
  const std::string uri = server_->Uri("upgrade", "table=v7_locks");
  {
    absl::StatusOr<std::unique_ptr<LockClient>> made = Connect(uri);
    ASSERT_OK(made);
  }
  // Back to what version 7 had: its meta row, no read-write functions.
  ASSERT_OK(server_->Psql(
      "UPDATE v7_locks_meta SET version = 7; "
      "DROP FUNCTION \"v7_locks_s_read_acquire\", \"v7_locks_s_read_release\", "
      "\"v7_locks_s_read_renew\", \"v7_locks_s_write_acquire\", "
      "\"v7_locks_s_write_release\", \"v7_locks_s_mark_readers\";"));
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
  ASSERT_OK(client);
  absl::StatusOr<std::string> version =
      server_->Psql("SELECT max(version) FROM v7_locks_meta;");
  ASSERT_OK(version);
  EXPECT_EQ(*version, "8");
  auto rw = *(*client)->GetReadWriteLock("after the upgrade");
  absl::StatusOr<Hold> read = rw->AcquireRead(AcquireOptions());
  ASSERT_OK(read);
  absl::StatusOr<std::unique_ptr<LockClient>> other = Connect(uri);
  ASSERT_OK(other);
  auto other_rw = *(*other)->GetReadWriteLock("after the upgrade");
  EXPECT_TRUE(IsHeldByAnother(other_rw->TryAcquireWrite().status()));
  EXPECT_OK(read->Release());
  absl::StatusOr<Hold> write = other_rw->TryAcquireWrite();
  ASSERT_OK(write);
  EXPECT_OK(write->Release());
}

}  // namespace
}  // namespace dlock::test
