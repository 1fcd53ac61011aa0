// Copyright dlock authors. The history checker's own tests: it must count
// what happened to the resource, not what the workers lived to log.
#include "history_checker.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "history_register.h"

namespace dlock::testing {
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
  ASSERT_TRUE(server.ok()) << server.status();
  RegisterClient client((*server)->port());
  ASSERT_TRUE(client.Set(1).ok());
  ASSERT_TRUE(client.Set(2).ok());  // applied; the worker died before logging

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
  ASSERT_TRUE(server.ok()) << server.status();
  RegisterClient a((*server)->port());
  RegisterClient b((*server)->port());
  absl::StatusOr<int64_t> read_a = a.Get();
  absl::StatusOr<int64_t> read_b = b.Get();
  ASSERT_TRUE(read_a.ok() && read_b.ok());
  ASSERT_TRUE(a.Set(*read_a + 1).ok());
  ASSERT_TRUE(b.Set(*read_b + 1).ok());

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

}  // namespace
}  // namespace dlock::testing
