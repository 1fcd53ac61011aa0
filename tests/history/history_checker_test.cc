// Copyright dlock authors. The history checker's own tests: it must count
// what happened to the resource, not what the workers lived to log.
#include "history_checker.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "history_register.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

WorkerHistory Worker(int id, std::vector<WorkerEvent> events) {
  WorkerHistory w;
  w.id = id;
  w.owner = absl::StrCat("worker-", id);
  w.events = std::move(events);
  return w;
}

// CI caught this: a worker killed with SIGKILL between its write reaching
// the register and its log line gave "lost updates -1".
TEST(HistoryChecker, WriteOfAKilledWorkerIsNotALostUpdate) {
  absl::StatusOr<std::unique_ptr<RegisterServer>> server =
      RegisterServer::Start();
  ASSERT_OK(server);
  RegisterClient client((*server)->port());
  ASSERT_OK(client.Set(1));
  ASSERT_OK(client.Set(2));  // applied; the worker died before logging

  WorkerHistory killed =
      Worker(0, {{.at_ns = 100, .kind = "grant", .token = 1},
                 {.at_ns = 110, .kind = "held", .token = 1},
                 {.at_ns = 120, .kind = "increment", .token = 1},
                 {.at_ns = 130, .kind = "held", .token = 1}});
  killed.killed_at_ns = 140;
  HistoryReport report = CheckHistory({killed}, (*server)->Writes(),
                                      (*server)->counter(), (*server)->sets(),
                                      /*healed_at_ns=*/140);
  EXPECT_EQ(report.increments, 2);
  EXPECT_EQ(report.lost_updates, 0) << report.Summary();
}

// Two believers reading the same value lose one update: still caught.
TEST(HistoryChecker, OverlappingReadModifyWriteIsALostUpdate) {
  absl::StatusOr<std::unique_ptr<RegisterServer>> server =
      RegisterServer::Start();
  ASSERT_OK(server);
  RegisterClient a((*server)->port());
  RegisterClient b((*server)->port());
  absl::StatusOr<int64_t> read_a = a.Get();
  absl::StatusOr<int64_t> read_b = b.Get();
  ASSERT_OK(read_a);
  ASSERT_OK(read_b);
  ASSERT_OK(a.Set(*read_a + 1));
  ASSERT_OK(b.Set(*read_b + 1));

  HistoryReport report = CheckHistory(
      {Worker(0, {{.at_ns = 100, .kind = "grant", .token = 1},
                  {.at_ns = 150, .kind = "increment", .token = 1}}),
       Worker(1, {{.at_ns = 120, .kind = "grant", .token = 2},
                  {.at_ns = 160, .kind = "increment", .token = 2}})},
      (*server)->Writes(), (*server)->counter(), (*server)->sets(),
      /*healed_at_ns=*/0);
  EXPECT_EQ(report.increments, 2);
  EXPECT_EQ(report.lost_updates, 1) << report.Summary();
}

// Issue 23: a release that never returned OK gives the hold up only under
// the lenient rule; under kConfirmed its hold must be told before the next
// grant. And a hold told twice is counted whatever the rule.
TEST(HistoryChecker, UnconfirmedReleaseMustBeToldUnderTheConfirmedRule) {
  const std::vector<WorkerHistory> workers = {
      Worker(0, {{.at_ns = 100, .kind = "grant", .token = 1},
                 {.at_ns = 110, .kind = "held", .token = 1},
                 {.at_ns = 120, .kind = "release_error", .token = 1},
                 {.at_ns = 300, .kind = "lost", .token = 1},
                 {.at_ns = 310, .kind = "lost", .token = 1}}),
      Worker(1, {{.at_ns = 200, .kind = "grant", .token = 2},
                 {.at_ns = 210, .kind = "released", .token = 2}})};
  HistoryReport lenient = CheckHistory(workers, {}, 0, 0, /*healed_at_ns=*/0);
  EXPECT_EQ(lenient.notices_late, 0) << lenient.Summary();
  EXPECT_EQ(lenient.notices_repeated, 1) << lenient.Summary();

  HistoryReport strict = CheckHistory(workers, {}, 0, 0, /*healed_at_ns=*/0,
                                      ReleaseRule::kConfirmed);
  EXPECT_EQ(strict.holds_superseded, 1) << strict.Summary();
  EXPECT_EQ(strict.notices_late, 1) << strict.Summary();
  EXPECT_EQ(strict.notices_repeated, 1) << strict.Summary();
}

// CI caught this: on a Redis restarted without persistence (the documented
// exception) the stale holder wrote after the new grant but before the new
// holder's first write. No fence can refuse that write; the checker counted
// it as the fence failing. A write below a token the register had already
// accepted is the fence failing, and is counted apart.
TEST(HistoryChecker, WriteBeforeTheNewHoldersFirstIsUnfencedNotStale) {
  absl::StatusOr<std::unique_ptr<RegisterServer>> server =
      RegisterServer::Start();
  ASSERT_OK(server);
  RegisterClient old_holder((*server)->port());
  RegisterClient new_holder((*server)->port());
  ASSERT_OK(old_holder.Write(1, 0));  // accepted: 2 not seen yet
  ASSERT_OK(new_holder.Write(2, 1));
  absl::StatusOr<bool> refused = old_holder.Write(1, 0);
  ASSERT_OK(refused);
  EXPECT_FALSE(*refused);
  const std::vector<RegisterWrite> writes = (*server)->Writes();
  ASSERT_EQ(writes.size(), 3u);
  const int64_t granted_2 = writes[0].at_ns - 1;  // just before the write

  HistoryReport report = CheckHistory(
      {Worker(0, {{.at_ns = granted_2 - 100, .kind = "grant", .token = 1}}),
       Worker(1, {{.at_ns = granted_2, .kind = "grant", .token = 2}})},
      writes, (*server)->counter(), (*server)->sets(),
      /*healed_at_ns=*/0);
  EXPECT_EQ(report.unfenced_writes_accepted, 1) << report.Summary();
  EXPECT_EQ(report.stale_writes_accepted, 0) << report.Summary();
  EXPECT_EQ(report.stale_writes_refused, 1) << report.Summary();
}

// A register that let a smaller token through after a larger one: the
// fence failed, whatever the grants say.
TEST(HistoryChecker, WriteBelowATokenTheRegisterAcceptedIsStale) {
  const std::vector<RegisterWrite> writes = {
      {.at_ns = 200, .token = 2, .worker = 1, .accepted = true},
      {.at_ns = 210, .token = 1, .worker = 0, .accepted = true}};
  HistoryReport report = CheckHistory(
      {Worker(0, {{.at_ns = 100, .kind = "grant", .token = 1}}),
       Worker(1, {{.at_ns = 150, .kind = "grant", .token = 2}})},
      writes, /*counter=*/0, /*counter_sets=*/0, /*healed_at_ns=*/0);
  EXPECT_EQ(report.stale_writes_accepted, 1) << report.Summary();
  EXPECT_EQ(report.unfenced_writes_accepted, 0) << report.Summary();
}

// The register keeps a fenced cell per key: a larger token in one cell
// fences nothing in another (each permit slot has its own holders).
TEST(HistoryRegister, CellsAreFencedApart) {
  absl::StatusOr<std::unique_ptr<RegisterServer>> server =
      RegisterServer::Start();
  ASSERT_OK(server);
  RegisterClient client((*server)->port());
  ASSERT_OK(client.Write(5, 0, /*key=*/1));
  absl::StatusOr<bool> other_cell = client.Write(3, 1, /*key=*/0);
  ASSERT_OK(other_cell);
  EXPECT_TRUE(*other_cell);
  absl::StatusOr<bool> same_cell = client.Write(4, 1, /*key=*/1);
  ASSERT_OK(same_cell);
  EXPECT_FALSE(*same_cell);
  ASSERT_OK(client.Set(7, /*key=*/1));
  EXPECT_EQ((*server)->counter(1), 7);
  EXPECT_EQ((*server)->sets(1), 1);
  EXPECT_EQ((*server)->counter(0), 0);
  EXPECT_EQ((*server)->max_token(1), 5u);
  EXPECT_EQ((*server)->last_writer(0), 1);
  EXPECT_EQ((*server)->Writes().back().key, 1);
}

// Readers believed together are what a read-write lock allows (C23); a
// writer beside a reader is an overlap, and so is a reader told of its
// loss only after a writer's grant.
TEST(HistoryChecker, ReadersTogetherAreNoOverlapAWriterBesideOneIs) {
  const std::vector<WorkerHistory> readers_only = {
      Worker(0,
             {{.at_ns = 100, .kind = "grant", .token = 1, .detail = "1 read"},
              {.at_ns = 300, .kind = "held", .token = 1},
              {.at_ns = 310, .kind = "released", .token = 1}}),
      Worker(1,
             {{.at_ns = 200, .kind = "grant", .token = 2, .detail = "1 read"},
              {.at_ns = 400, .kind = "held", .token = 2},
              {.at_ns = 410, .kind = "released", .token = 2}})};
  HistoryReport together = CheckHistory(readers_only, {}, 0, 0, 0);
  EXPECT_EQ(together.overlaps, 0) << together.Summary();
  EXPECT_EQ(together.shared_overlaps, 1) << together.Summary();
  EXPECT_EQ(together.notices_late, 0) << together.Summary();

  std::vector<WorkerHistory> with_writer = readers_only;
  with_writer.push_back(
      Worker(2, {{.at_ns = 350, .kind = "grant", .token = 3, .detail = "1"},
                 {.at_ns = 355, .kind = "held", .token = 3},
                 {.at_ns = 360, .kind = "released", .token = 3}}));
  HistoryReport beside = CheckHistory(with_writer, {}, 0, 0, 0);
  EXPECT_EQ(beside.overlaps, 1) << beside.Summary();  // reader 1 until 400
  EXPECT_EQ(beside.notices_late, 1) << beside.Summary();
  EXPECT_EQ(beside.shared_overlaps, 1) << beside.Summary();
}

// Readers granted side by side log their grants in any order: a reader's
// smaller token logged after another reader's is no regression; a writer's
// below an earlier reader's is.
TEST(HistoryChecker, ReadersTokensAreNotOrderedAmongThemselves) {
  std::vector<WorkerHistory> workers = {
      Worker(0,
             {{.at_ns = 100, .kind = "grant", .token = 6, .detail = "1 read"},
              {.at_ns = 150, .kind = "released", .token = 6}}),
      Worker(1,
             {{.at_ns = 110, .kind = "grant", .token = 5, .detail = "1 read"},
              {.at_ns = 160, .kind = "released", .token = 5}})};
  EXPECT_EQ(CheckHistory(workers, {}, 0, 0, 0).token_regressions, 0);
  workers.push_back(
      Worker(2, {{.at_ns = 200, .kind = "grant", .token = 4, .detail = "1"}}));
  EXPECT_EQ(CheckHistory(workers, {}, 0, 0, 0).token_regressions, 1);
}

// A reader's token does not fence a writer: a writer's write with a token
// below a later reader's grant is neither stale nor unfenced.
TEST(HistoryChecker, ReadersTokensDoNotFenceWriters) {
  const std::vector<RegisterWrite> writes = {
      {.at_ns = 250, .token = 1, .worker = 0, .accepted = true}};
  HistoryReport report = CheckHistory(
      {Worker(0, {{.at_ns = 100, .kind = "grant", .token = 1, .detail = "1"},
                  {.at_ns = 260, .kind = "released", .token = 1}}),
       Worker(
           1,
           {{.at_ns = 300, .kind = "grant", .token = 2, .detail = "1 read"}})},
      writes, 0, 0, 0);
  EXPECT_EQ(report.unfenced_writes_accepted, 0) << report.Summary();
  EXPECT_EQ(report.stale_writes_accepted, 0) << report.Summary();
}

// A semaphore of 2: holders of different slots overlap by design; two
// believed holders of one slot, or three at once, do not.
TEST(HistoryChecker, PermitsAreCheckedPerSlotAndCountedOverAll) {
  auto grant = [](int64_t at, uint64_t token, int slot) {
    return WorkerEvent{.at_ns = at,
                       .kind = "grant",
                       .token = token,
                       .detail = absl::StrCat("1 slot ", slot)};
  };
  auto held = [](int64_t at, uint64_t token) {
    return WorkerEvent{.at_ns = at, .kind = "held", .token = token};
  };
  auto released = [](int64_t at, uint64_t token) {
    return WorkerEvent{.at_ns = at, .kind = "released", .token = token};
  };
  const std::vector<std::pair<int64_t, int64_t>> cells = {{0, 0}, {0, 0}};
  const std::vector<WorkerHistory> two_slots = {
      Worker(0, {grant(100, 1, 0), held(300, 1), released(310, 1)}),
      Worker(1, {grant(150, 2, 1), held(350, 2), released(360, 2)}),
      Worker(2, {grant(320, 3, 0), held(400, 3), released(410, 3)})};
  HistoryReport fine =
      CheckKeyedHistory(two_slots, {}, cells, 0, KeyedObject::kSemaphore);
  EXPECT_EQ(fine.max_believed_at_once, 2) << fine.Summary();
  EXPECT_EQ(fine.overlaps, 0) << fine.Summary();
  EXPECT_EQ(fine.grants, 3) << fine.Summary();

  // Worker 2 granted slot 1 while worker 1 still believes it: an overlap
  // within the slot, and three believed at once.
  std::vector<WorkerHistory> shared_slot = two_slots;
  shared_slot[2] =
      Worker(2, {grant(200, 3, 1), held(400, 3), released(410, 3)});
  HistoryReport bad =
      CheckKeyedHistory(shared_slot, {}, cells, 0, KeyedObject::kSemaphore);
  EXPECT_EQ(bad.overlaps, 1) << bad.Summary();
  EXPECT_EQ(bad.max_believed_at_once, 3) << bad.Summary();
  EXPECT_EQ(bad.notices_late, 1) << bad.Summary();

  // The fence is per slot: slot 1's writes are judged by slot 1's grants.
  const std::vector<RegisterWrite> writes = {
      {.at_ns = 330, .token = 1, .worker = 0, .accepted = true, .key = 0},
      {.at_ns = 340, .token = 2, .worker = 1, .accepted = true, .key = 1}};
  HistoryReport fenced =
      CheckKeyedHistory(two_slots, writes, cells, 0, KeyedObject::kSemaphore);
  EXPECT_EQ(fenced.unfenced_writes_accepted, 1) << fenced.Summary();
}

// A multi-lock's names may carry one token: each name's view holds only
// the grant of that name, and the notices of the whole hold.
TEST(HistoryChecker, MultiLockNamesSharingATokenAreCheckedApart) {
  auto grant = [](int64_t at, uint64_t token, int name) {
    return WorkerEvent{.at_ns = at,
                       .kind = "grant",
                       .token = token,
                       .detail = absl::StrCat("1 slot ", name)};
  };
  const std::vector<std::pair<int64_t, int64_t>> cells = {{0, 0}, {0, 0}};
  const std::vector<WorkerHistory> workers = {
      Worker(0, {grant(100, 7, 0),
                 grant(100, 7, 1),
                 {.at_ns = 200, .kind = "held", .token = 7},
                 {.at_ns = 210, .kind = "released", .token = 7}}),
      Worker(1, {grant(300, 9, 0),
                 grant(301, 8, 1),
                 {.at_ns = 400, .kind = "held", .token = 8},
                 {.at_ns = 400, .kind = "held", .token = 9},
                 {.at_ns = 410, .kind = "lost", .token = 8},
                 {.at_ns = 410, .kind = "lost", .token = 9}})};
  HistoryReport report =
      CheckKeyedHistory(workers, {}, cells, 0, KeyedObject::kMultiLock);
  EXPECT_EQ(report.grants, 4) << report.Summary();
  EXPECT_EQ(report.overlaps, 0) << report.Summary();
  EXPECT_EQ(report.notices_repeated, 0) << report.Summary();
  // Worker 0 released both names before worker 1 was granted them.
  EXPECT_EQ(report.holds_superseded, 0) << report.Summary();
  EXPECT_EQ(report.notices_late, 0) << report.Summary();
  // Name 0 went 7 then 9, name 1 7 then 8: in order per name, though 9
  // came before 8 across them.
  EXPECT_EQ(report.token_regressions, 0) << report.Summary();
}

// Permits granted side by side are logged in any order: a smaller token
// logged after a larger one is a regression only when its acquire began
// after the larger was granted.
TEST(HistoryChecker, ConcurrentPermitGrantsLoggedOutOfOrderAreNoRegression) {
  auto attempt = [](int64_t at) {
    return WorkerEvent{.at_ns = at, .kind = "attempt"};
  };
  auto grant = [](int64_t at, uint64_t token, int slot) {
    return WorkerEvent{.at_ns = at,
                       .kind = "grant",
                       .token = token,
                       .detail = absl::StrCat("1 slot ", slot)};
  };
  const std::vector<std::pair<int64_t, int64_t>> cells = {{0, 0}, {0, 0}};
  // Worker 0 got token 5 first but logged it after worker 1's token 6.
  std::vector<WorkerHistory> workers = {
      Worker(0, {attempt(100), grant(130, 5, 0)}),
      Worker(1, {attempt(110), grant(120, 6, 1)})};
  EXPECT_EQ(CheckKeyedHistory(workers, {}, cells, 0, KeyedObject::kSemaphore)
                .token_regressions,
            0);
  // Asked after token 6 was granted, and got 5: a regression.
  workers[0] = Worker(0, {attempt(125), grant(130, 5, 0)});
  EXPECT_EQ(CheckKeyedHistory(workers, {}, cells, 0, KeyedObject::kSemaphore)
                .token_regressions,
            1);
}

}  // namespace
}  // namespace dlock::test
