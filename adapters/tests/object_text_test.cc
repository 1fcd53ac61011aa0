// The objects beyond the mutex in the CLI's words, as pure functions: the
// KIND and HOLDERS columns of `list`, `status`'s lines, `top`'s rows.
#include "object_text.h"

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dlock::cli {
namespace {

using ::testing::HasSubstr;

HolderInfo Holder(std::string owner, uint64_t token, bool shared = false,
                  std::vector<int64_t> slots = {}) {
  return HolderInfo{.owner = std::move(owner),
                    .shared = shared,
                    .hold_count = 1,
                    .fencing_token = token,
                    .slots = std::move(slots),
                    .remaining_lease = absl::Seconds(20),
                    .since = absl::FromUnixSeconds(1000),
                    .holder_live = true};
}

TEST(ObjectTextTest, KindAndHoldersColumns) {
  ObjectInfo readers{.kind = ObjectKind::kLock,
                     .name = "catalog",
                     .limit = 1,
                     .holders = {Holder("r1", 4, true), Holder("r2", 5, true)},
                     .waiter = WaiterInfo{.owner = "w", .permits = 1}};
  EXPECT_EQ(KindColumn(readers), "read");
  EXPECT_EQ(HoldersSummary(readers), "2 readers, writer waiting");
  ObjectInfo writer{.kind = ObjectKind::kLock,
                    .name = "catalog",
                    .holders = {Holder("w", 6)}};
  EXPECT_EQ(KindColumn(writer), "lock");
  EXPECT_EQ(HoldersSummary(writer), "writer");
  ObjectInfo sem{
      .kind = ObjectKind::kSemaphore,
      .name = "jobs",
      .limit = 4,
      .holders = {Holder("a", 7, false, {0, 2}), Holder("b", 8, false, {1})}};
  EXPECT_EQ(KindColumn(sem), "sem");
  EXPECT_EQ(HoldersSummary(sem), "3/4 permits");
  ObjectInfo election{.kind = ObjectKind::kElection,
                      .name = "scheduler",
                      .limit = 1,
                      .holders = {Holder("leader", 12)},
                      .value = "10.0.0.7:80"};
  EXPECT_EQ(KindColumn(election), "elect");
  EXPECT_EQ(HoldersSummary(election), "term 12");
  EXPECT_EQ(HoldersSummary(ObjectInfo{.kind = ObjectKind::kElection}),
            "no leader");
}

TEST(ObjectTextTest, StatusLinesNameEachHolderAndSlot) {
  ObjectInfo sem{.kind = ObjectKind::kSemaphore,
                 .name = "jobs",
                 .limit = 4,
                 .holders = {Holder("a", 7, false, {0, 2})},
                 .waiter = WaiterInfo{.owner = "c", .permits = 3}};
  const std::string text = ObjectStatusText(sem);
  EXPECT_THAT(text, HasSubstr("jobs (semaphore): 2/4 permits, 3 waiting\n"));
  EXPECT_THAT(text, HasSubstr("  holder: a (fencing token 7) slots 0,2, "
                              "lease left 20.0s, live\n"));
  EXPECT_THAT(text, HasSubstr("  waiting: c for 3 permits\n"));
}

TEST(ObjectTextTest, JsonHasTheObjectInfoFields) {
  ObjectInfo election{.kind = ObjectKind::kElection,
                      .name = "scheduler",
                      .limit = 1,
                      .holders = {Holder("leader", 12)},
                      .value = "v"};
  const nlohmann::ordered_json json = ObjectJson(election);
  EXPECT_EQ(json["kind"], "election");
  EXPECT_EQ(json["holders"][0]["fencing_token"], 12);
  EXPECT_EQ(json["holders"][0]["lease_left_ms"], 20000);
  EXPECT_EQ(json["holders"][0]["since"], "1970-01-01T00:16:40.000Z");
  EXPECT_EQ(json["value"], "v");
  EXPECT_TRUE(json["waiter"].is_null());
}

TEST(ObjectTextTest, TopRowSummarizesEveryHolder) {
  HolderInfo stale = Holder("b", 9, false, {1});
  stale.holder_live = false;
  stale.remaining_lease = absl::Seconds(3);
  ObjectInfo sem{.kind = ObjectKind::kSemaphore,
                 .name = "jobs",
                 .limit = 2,
                 .holders = {Holder("a", 7, false, {0}), stale}};
  const LockInfo row = ObjectAsLockRow(sem);
  EXPECT_EQ(row.name, "jobs (sem)");
  EXPECT_EQ(row.owner, "2/2 permits: a, b");
  EXPECT_EQ(row.fencing_token, 9u);
  EXPECT_EQ(row.remaining_lease, absl::Seconds(3));
  EXPECT_EQ(row.holder_live, std::optional<bool>(false));
}

TEST(ObjectTextTest, DeadHoldersAreNamedByTheirTokenNotTheObject) {
  HolderInfo dead_reader = Holder("gone", 5, true);
  dead_reader.holder_live = false;
  HolderInfo unknown = Holder("maybe", 6, true);
  unknown.holder_live.reset();
  ObjectInfo readers{.kind = ObjectKind::kLock,
                     .name = "catalog",
                     .holders = {Holder("r1", 4, true), dead_reader, unknown}};
  const std::vector<DeadObjectHolder> dead = DeadObjectHolders({readers});
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].kind, ObjectKind::kLock);
  EXPECT_EQ(dead[0].name, "catalog");
  EXPECT_EQ(dead[0].owner, "gone");
  EXPECT_EQ(dead[0].fencing_token, 5u);
}

TEST(ObjectTextTest, KindFlagValues) {
  EXPECT_EQ(*ParseKind("Semaphore"), ObjectKind::kSemaphore);
  EXPECT_EQ(*ParseKind("elect"), ObjectKind::kElection);
  EXPECT_EQ(*ParseKind("read"), ObjectKind::kLock);
  EXPECT_FALSE(ParseKind("queue").ok());
}

}  // namespace
}  // namespace dlock::cli
