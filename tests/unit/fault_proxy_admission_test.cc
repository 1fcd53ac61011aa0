// Copyright dlock authors. FaultProxy's admission of new
// connections (refuse, reset, blackhole), partitions and heals, and upstreams
// it cannot reach.
#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "fault_proxy.h"
#include "fault_proxy_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

TEST_F(FaultProxyTest, RefuseMakesConnectFailAndAcceptListensAgain) {
  absl::StatusOr<Pair> before = Connect();
  ASSERT_OK(before);
  // Leave a TIME_WAIT on the proxy's port: listening again must not mind.
  absl::StatusOr<Pair> closed = Connect();
  ASSERT_OK(closed);
  closed->server.Reset();
  EXPECT_EQ(ReadSome(closed->client.get(), kLong).kind, ReadOutcome::kEof);
  closed->client.Reset();

  const int port = proxy_.port();
  ASSERT_OK(proxy_.SetAdmission(Admission::kRefuse));
  EXPECT_EQ(ConnectTo(port).error, ECONNREFUSED);
  ExpectForwards(*before, Direction::kRequests, "open ones live on");
  EXPECT_EQ(proxy_.stats().accepted, 2u);
  // From no listener straight to a blackhole, and back.
  ASSERT_OK(proxy_.SetAdmission(Admission::kBlackhole));
  EXPECT_EQ(ConnectTo(port, absl::Milliseconds(500)).error, ETIMEDOUT);
  ASSERT_OK(proxy_.SetAdmission(Admission::kRefuse));
  EXPECT_EQ(ConnectTo(port).error, ECONNREFUSED);

  ASSERT_OK(proxy_.SetAdmission(Admission::kAccept));
  EXPECT_EQ(proxy_.port(), port);
  absl::StatusOr<Pair> after = Connect();
  ASSERT_OK(after);
  ExpectForwards(*after, Direction::kReplies, "back");
}

TEST_F(FaultProxyTest, ResetAdmissionAcceptsThenResets) {
  ASSERT_OK(proxy_.SetAdmission(Admission::kReset));
  ExpectConnectThenReset(proxy_.port(), "client of kReset");
  EXPECT_EQ(proxy_.stats().accepted, 1u);
  EXPECT_EQ(proxy_.stats().live, 0u);
  EXPECT_FALSE(server_.Accept(kQuiet).ok()) << "the server got a client";
}

TEST_F(FaultProxyTest, BlackholeMakesConnectTimeOutUntilLifted) {
  absl::StatusOr<Pair> before = Connect();
  ASSERT_OK(before);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    ASSERT_OK(proxy_.SetAdmission(Admission::kBlackhole));
    const Clock::time_point start = Clock::now();
    Connected hung = ConnectTo(proxy_.port(), absl::Milliseconds(500));
    EXPECT_EQ(hung.error, ETIMEDOUT) << std::strerror(hung.error);
    EXPECT_GE(Since(start), absl::Milliseconds(500));
    // Blackholing new connections leaves open ones alone.
    ExpectForwards(*before, Direction::kRequests, "still up");

    ASSERT_OK(proxy_.SetAdmission(Admission::kAccept));
    absl::StatusOr<Pair> after = Connect();
    ASSERT_OK(after);
    ExpectForwards(*after, Direction::kReplies, "through");
  }
  // The proxy's own queue fillers are neither counted nor forwarded.
  EXPECT_EQ(proxy_.stats().accepted, 3u);
  EXPECT_FALSE(server_.Accept(kQuiet).ok());
}

TEST_F(FaultProxyTest, PartitionHangsEverythingAndHealDeliversInOrder) {
  absl::StatusOr<Pair> pair = Connect();
  ASSERT_OK(pair);
  ASSERT_OK(proxy_.Partition());
  WriteAll(pair->client.get(), "GET k");
  WriteAll(pair->server.get(), "$late");
  ASSERT_OK(proxy_.WaitForReceived(Direction::kRequests, 5, kLong));
  ASSERT_OK(proxy_.WaitForReceived(Direction::kReplies, 5, kLong));
  ExpectQuiet(pair->server.get(), "server during a partition");
  ExpectQuiet(pair->client.get(), "client during a partition");
  EXPECT_EQ(ConnectTo(proxy_.port(), absl::Milliseconds(500)).error, ETIMEDOUT);
  // A client that keeps trying gets through once the network is back: the
  // kernel retransmits its SYN.
  PendingConnect patient = StartConnect(proxy_.port());

  ASSERT_OK(proxy_.Heal());
  absl::StatusOr<std::string> got = ReadExactly(pair->server.get(), 5);
  ASSERT_OK(got);
  EXPECT_EQ(*got, "GET k");
  got = ReadExactly(pair->client.get(), 5);
  ASSERT_OK(got);
  EXPECT_EQ(*got, "$late");
  EXPECT_EQ(Finish(patient, kLong), 0);
  absl::StatusOr<Fd> patient_upstream = server_.Accept();
  ASSERT_OK(patient_upstream);
  WriteAll(patient.fd.get(), "hi");
  got = ReadExactly(patient_upstream->get(), 2);
  ASSERT_OK(got);
  EXPECT_EQ(*got, "hi");
}

TEST_F(FaultProxyTest, HealCanDiscardWhatThePartitionHeld) {
  absl::StatusOr<Pair> pair = Connect();
  ASSERT_OK(pair);
  ASSERT_OK(proxy_.Partition());
  WriteAll(pair->client.get(), "old");
  ASSERT_OK(proxy_.WaitForReceived(Direction::kRequests, 3, kLong));
  ASSERT_OK(proxy_.Heal(Held::kDiscard));
  ExpectForwards(*pair, Direction::kRequests, "new");
  EXPECT_EQ(proxy_.stats().requests.dropped, 3u);
}

TEST_F(FaultProxyTest, UnreachableUpstreamResetsTheClient) {
  absl::StatusOr<int> nobody = FreeLoopbackPort();
  ASSERT_OK(nobody);
  ASSERT_OK(proxy_.SetUpstream("127.0.0.1", *nobody));
  ExpectConnectThenReset(proxy_.port(), "client of an unreachable upstream");
  ASSERT_OK(proxy_.WaitFor([](const ProxyStats& s) { return s.live == 0; },
                           kLong, "connection closed"));
}

// The upstream is another proxy that blackholes: its connect() hangs, and
// the first proxy gives up after its timeout.
TEST(FaultProxyChain, UpstreamConnectTimesOut) {
  Server server;
  FaultProxy unreachable;
  ASSERT_OK(unreachable.Start("127.0.0.1", server.port()));
  ASSERT_OK(unreachable.SetAdmission(Admission::kBlackhole));
  const absl::Duration timeout = absl::Milliseconds(300);
  FaultProxy proxy({.upstream_connect_timeout = timeout});
  ASSERT_OK(proxy.Start("127.0.0.1", unreachable.port()));

  const Clock::time_point start = Clock::now();
  ExpectConnectThenReset(proxy.port(), "client of a hung upstream");
  EXPECT_EQ(proxy.stats().accepted, 1u);
  EXPECT_GE(Since(start), timeout);
  EXPECT_EQ(proxy.stats().live, 0u);
  EXPECT_EQ(unreachable.stats().accepted, 0u);
}

}  // namespace
}  // namespace dlock::test
