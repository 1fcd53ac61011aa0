// Copyright dlock authors. FaultProxy's faults of one direction
// (delay, stall, drop), requests and replies alike.
#include <sys/socket.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fault_proxy.h"
#include "fault_proxy_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

class DirectionTest : public FaultProxyTest,
                      public ::testing::WithParamInterface<Direction> {};

INSTANTIATE_TEST_SUITE_P(BothWays, DirectionTest,
                         ::testing::Values(Direction::kRequests,
                                           Direction::kReplies),
                         [](const ::testing::TestParamInfo<Direction>& info) {
                           return info.param == Direction::kRequests
                                      ? "Requests"
                                      : "Replies";
                         });

TEST_P(DirectionTest, DelayHoldsEachChunkAndKeepsOrder) {
  const Direction d = GetParam();
  absl::StatusOr<Pair> pair = Connect();
  ASSERT_OK(pair);
  const absl::Duration delay = absl::Milliseconds(400);
  proxy_.SetFault(d, Fault::Delay(delay));
  EXPECT_EQ(proxy_.Connections()[0].requests,
            d == Direction::kRequests ? Fault::Delay(delay) : Fault::Pass());

  Clock::time_point start = Clock::now();
  WriteAll(pair->sender(d), "a");
  WriteAll(pair->sender(d), "b");
  WriteAll(pair->sender(d), "c");
  absl::StatusOr<std::string> got = ReadExactly(pair->receiver(d), 3);
  ASSERT_OK(got);
  EXPECT_GE(Since(start), delay);
  EXPECT_EQ(*got, "abc");

  // Bytes read after the delay is lifted still wait for those before them.
  start = Clock::now();
  WriteAll(pair->sender(d), "x");
  ASSERT_OK(proxy_.WaitForReceived(d, 4, kLong));
  proxy_.SetFault(d, Fault::Pass());
  WriteAll(pair->sender(d), "y");
  got = ReadExactly(pair->receiver(d), 2);
  ASSERT_OK(got);
  EXPECT_GE(Since(start), delay);
  EXPECT_EQ(*got, "xy");
}

TEST_P(DirectionTest, StallHoldsBytesSilentlyAndDeliversThemInOrder) {
  const Direction d = GetParam();
  absl::StatusOr<Pair> pair = Connect();
  ASSERT_OK(pair);
  proxy_.SetFault(d, Fault::Stall());
  WriteAll(pair->sender(d), "hello");
  ASSERT_OK(proxy_.WaitForReceived(d, 5, kLong));
  WriteAll(pair->sender(d), " world");
  ASSERT_OK(proxy_.WaitForReceived(d, 11, kLong));

  // A read times out: no bytes, and no FIN or RST either.
  ExpectQuiet(pair->receiver(d), "receiver during a stall");
  ExpectQuiet(pair->sender(d), "sender during a stall");
  EXPECT_EQ(proxy_.stats()[d].forwarded, 0u);
  EXPECT_EQ(proxy_.stats().live, 1u);

  proxy_.SetFault(d, Fault::Pass());
  absl::StatusOr<std::string> got = ReadExactly(pair->receiver(d), 11);
  ASSERT_OK(got);
  EXPECT_EQ(*got, "hello world");
  ExpectForwards(*pair, d, "after");
}

// A stall holds bytes read before it that were not sent yet, and lifting it
// into a delay delays what it held.
TEST_P(DirectionTest, StallHoldsDelayedBytesAndCanBeLiftedIntoADelay) {
  const Direction d = GetParam();
  absl::StatusOr<Pair> pair = Connect();
  ASSERT_OK(pair);
  // Long enough that the stall surely starts before "a" is due.
  const absl::Duration delay = absl::Milliseconds(500);
  proxy_.SetFault(d, Fault::Delay(delay));
  WriteAll(pair->sender(d), "a");
  ASSERT_OK(proxy_.WaitForReceived(d, 1, kLong));
  proxy_.SetFault(d, Fault::Stall());
  ASSERT_EQ(proxy_.stats()[d].forwarded, 0u) << "the machine is too slow";
  WriteAll(pair->sender(d), "b");
  ASSERT_OK(proxy_.WaitForReceived(d, 2, kLong));
  // Past the time "a" was due.
  ExpectQuiet(pair->receiver(d), "a delayed byte under a stall",
              delay + kQuiet);

  const Clock::time_point lifted = Clock::now();
  proxy_.SetFault(d, Fault::Delay(delay));
  absl::StatusOr<std::string> got = ReadExactly(pair->receiver(d), 2);
  ASSERT_OK(got);
  EXPECT_EQ(*got, "ab");
  EXPECT_GE(Since(lifted), delay);  // "b" waited its delay after the lift
}

TEST_P(DirectionTest, StallLiftedWithDiscardLosesOnlyTheHeldBytes) {
  const Direction d = GetParam();
  absl::StatusOr<Pair> pair = Connect();
  ASSERT_OK(pair);
  proxy_.SetFault(d, Fault::Stall());
  WriteAll(pair->sender(d), "lost");
  ASSERT_OK(proxy_.WaitForReceived(d, 4, kLong));
  proxy_.SetFault(d, Fault::Pass(), Held::kDiscard);
  ExpectForwards(*pair, d, "kept");
  EXPECT_EQ(proxy_.stats()[d].dropped, 4u);
  EXPECT_EQ(proxy_.stats()[d].forwarded, 4u);
}

TEST_P(DirectionTest, StallHoldsTheEndOfTheStreamBehindItsBytes) {
  const Direction d = GetParam();
  absl::StatusOr<Pair> pair = Connect();
  ASSERT_OK(pair);
  proxy_.SetFault(d, Fault::Stall());
  WriteAll(pair->sender(d), "last");
  shutdown(pair->sender(d), SHUT_WR);
  ASSERT_OK(proxy_.WaitForReceived(d, 4, kLong));
  ExpectQuiet(pair->receiver(d), "receiver of a stalled FIN");
  proxy_.SetFault(d, Fault::Pass());
  absl::StatusOr<std::string> got = ReadExactly(pair->receiver(d), 4);
  ASSERT_OK(got);
  EXPECT_EQ(*got, "last");
  EXPECT_EQ(ReadSome(pair->receiver(d), kLong).kind, ReadOutcome::kEof);
}

TEST_P(DirectionTest, DropDiscardsBytesAndKeepsTheConnection) {
  const Direction d = GetParam();
  absl::StatusOr<Pair> pair = Connect();
  ASSERT_OK(pair);
  proxy_.SetFault(d, Fault::Drop());
  WriteAll(pair->sender(d), "lost reply");
  ASSERT_OK(proxy_.WaitForReceived(d, 10, kLong));
  EXPECT_EQ(proxy_.stats()[d].dropped, 10u);
  ExpectQuiet(pair->receiver(d), "receiver of dropped bytes");
  // The other way still works.
  const Direction other =
      d == Direction::kRequests ? Direction::kReplies : Direction::kRequests;
  ExpectForwards(*pair, other, "other way");

  proxy_.SetFault(d, Fault::Pass());
  ExpectForwards(*pair, d, "next");
  EXPECT_EQ(proxy_.stats()[d].forwarded, 4u);
}

}  // namespace
}  // namespace dlock::test
