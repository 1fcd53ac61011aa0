// Copyright dlock authors. Unit tests of the client core's keys for the
// holds of issue 24's primitives (core/src/qualified_name.h), and of how
// the contract's errors word them.
#include "qualified_name.h"

#include <string>

#include "dlock/errors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock::internal {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr HoldShape kWriter;
constexpr HoldShape kReader{.kind = ObjectKind::kLock,
                            .mode = HoldMode::kShared};
constexpr HoldShape kPermits{.kind = ObjectKind::kSemaphore,
                             .mode = HoldMode::kPermits,
                             .permits = 2,
                             .limit = 3};
constexpr HoldShape kLeader{.kind = ObjectKind::kElection};

TEST(QualifiedName, ALockWritersKeyIsItsName) {
  EXPECT_EQ(QualifiedName("jobs", kWriter), "jobs");
  EXPECT_FALSE(IsQualified("jobs"));
  EXPECT_TRUE(ShapeOf("jobs").IsLockWriter());
  EXPECT_EQ(ObjectNameOf("jobs"), "jobs");
}

TEST(QualifiedName, EveryShapeHasAKeyOfItsOwnAndComesBack) {
  const std::string read = QualifiedName("jobs", kReader);
  const std::string sem = QualifiedName("jobs", kPermits);
  const std::string leader = QualifiedName("jobs", kLeader);
  EXPECT_NE(read, sem);
  EXPECT_NE(sem, leader);
  EXPECT_NE(read, "jobs");
  for (const std::string& key : {read, sem, leader}) {
    EXPECT_TRUE(IsQualified(key)) << key;
    EXPECT_EQ(ObjectNameOf(key), "jobs");
  }
  EXPECT_EQ(ShapeOf(read).kind, ObjectKind::kLock);
  EXPECT_EQ(ShapeOf(read).mode, HoldMode::kShared);
  EXPECT_EQ(ShapeOf(sem).kind, ObjectKind::kSemaphore);
  EXPECT_EQ(ShapeOf(sem).mode, HoldMode::kPermits);
  EXPECT_EQ(ShapeOf(leader).kind, ObjectKind::kElection);
  EXPECT_EQ(ShapeOf(leader).mode, HoldMode::kExclusive);
  // Permits and N are not part of a key: one owner, one grant (C5).
  EXPECT_EQ(QualifiedName("jobs", HoldShape{.kind = ObjectKind::kSemaphore,
                                            .mode = HoldMode::kPermits}),
            sem);
}

TEST(QualifiedName, MessagesNameTheObjectNeverTheKey) {
  EXPECT_EQ(ObjectPhrase("jobs"), "lock 'jobs'");
  EXPECT_EQ(ObjectPhrase(QualifiedName("jobs", kReader)), "read lock 'jobs'");
  EXPECT_EQ(ObjectPhrase(QualifiedName("jobs", kPermits)), "semaphore 'jobs'");
  EXPECT_EQ(ObjectPhrase(QualifiedName("jobs", kLeader)), "election 'jobs'");
  const absl::Status busy = HeldByAnotherError(QualifiedName("jobs", kPermits));
  EXPECT_THAT(std::string(busy.message()),
              HasSubstr("semaphore 'jobs' has too few permits free"));
  EXPECT_THAT(std::string(busy.message()), Not(HasSubstr("\x1f")));
  const absl::Status lost =
      LostError(QualifiedName("jobs", kLeader), "its lease ended");
  EXPECT_TRUE(IsLost(lost));
  EXPECT_THAT(std::string(lost.message()),
              HasSubstr("election 'jobs' was lost"));
}

TEST(PrimitiveErrors, CarryTheirKinds) {
  const absl::Status limit = LimitMismatchError("renders", 3, 4);
  EXPECT_TRUE(IsLimitMismatch(limit));
  EXPECT_TRUE(absl::IsFailedPrecondition(limit));
  EXPECT_THAT(std::string(limit.message()), HasSubstr("N=3"));
  const absl::Status permits = PermitsMismatchError("renders", 2, 1);
  EXPECT_TRUE(IsPermitsMismatch(permits));
  EXPECT_TRUE(absl::IsFailedPrecondition(permits));
  const absl::Status upgrade = UpgradeRefusedError("catalog");
  EXPECT_TRUE(IsUpgradeRefused(upgrade));
  EXPECT_TRUE(absl::IsFailedPrecondition(upgrade));
  EXPECT_EQ(ErrorKindName(ErrorKind::kUpgradeRefused), "upgrade_refused");
}

}  // namespace
}  // namespace dlock::internal
