// Copyright dlock authors. FaultProxy with real loopback sockets:
// forwarding, faults of one connection or of all, the wait helpers and the
// proxy's lifecycle (fault_proxy_test_util.h says how the tests work).
#include "fault_proxy.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "fault_proxy_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

using ::testing::HasSubstr;

TEST_F(FaultProxyTest, PassForwardsBothWaysAndCounts) {
  absl::StatusOr<Pair> pair = Connect();
  ASSERT_OK(pair);
  EXPECT_EQ(pair->id, 1u);
  ExpectForwards(*pair, Direction::kRequests, "PING\r\n");
  ExpectForwards(*pair, Direction::kReplies, "+PONG\r\n");

  ProxyStats s = proxy_.stats();
  EXPECT_EQ(s.accepted, 1u);
  EXPECT_EQ(s.live, 1u);
  EXPECT_EQ(s.requests.received, 6u);
  EXPECT_EQ(s.requests.forwarded, 6u);
  EXPECT_EQ(s.replies.received, 7u);
  EXPECT_EQ(s.replies.forwarded, 7u);
  EXPECT_EQ(s.requests.dropped + s.replies.dropped, 0u);

  std::vector<ConnectionInfo> conns = proxy_.Connections();
  ASSERT_EQ(conns.size(), 1u);
  EXPECT_EQ(conns[0].id, 1u);
  EXPECT_EQ(conns[0].upstream, absl::StrCat("127.0.0.1:", server_.port()));
  EXPECT_TRUE(conns[0].connected);
  EXPECT_EQ(conns[0].requests, Fault::Pass());
  EXPECT_EQ(conns[0].replies, Fault::Pass());
  EXPECT_EQ(conns[0].request_bytes.forwarded, 6u);
  EXPECT_EQ(conns[0].reply_bytes.forwarded, 7u);
}

// Megabytes each way at once, through a small buffer: partial writes and
// flow control keep every byte, in order.
TEST(FaultProxyBulk, LargeTransfersBothWaysKeepOrder) {
  Server server;
  FaultProxy proxy({.max_buffered_bytes = 64 * 1024});
  ASSERT_OK(proxy.Start("localhost", server.port()));
  Connected client = ConnectTo(proxy.port());
  ASSERT_EQ(client.error, 0) << std::strerror(client.error);
  absl::StatusOr<Fd> upstream = server.Accept();
  ASSERT_OK(upstream);

  std::string data(3 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i % 251);
  std::thread up([&] { WriteAll(client.fd.get(), data); });
  std::thread down([&] { WriteAll(upstream->get(), data); });
  absl::StatusOr<std::string> at_server =
      ReadExactly(upstream->get(), data.size());
  absl::StatusOr<std::string> at_client =
      ReadExactly(client.fd.get(), data.size());
  // Unblocks the writers if the reads failed.
  shutdown(client.fd.get(), SHUT_RDWR);
  shutdown(upstream->get(), SHUT_RDWR);
  up.join();
  down.join();
  ASSERT_OK(at_server);
  ASSERT_OK(at_client);
  EXPECT_TRUE(*at_server == data);
  EXPECT_TRUE(*at_client == data);
  EXPECT_EQ(proxy.stats().requests.forwarded, data.size());
  EXPECT_EQ(proxy.stats().replies.forwarded, data.size());
}

TEST_F(FaultProxyTest, ClosingOneSideIsForwardedAndEndsTheConnection) {
  absl::StatusOr<Pair> pair = Connect();
  ASSERT_OK(pair);
  WriteAll(pair->client.get(), "QUIT");
  shutdown(pair->client.get(), SHUT_WR);
  absl::StatusOr<std::string> got = ReadExactly(pair->server.get(), 4);
  ASSERT_OK(got);
  EXPECT_EQ(ReadSome(pair->server.get(), kLong).kind, ReadOutcome::kEof);
  // The server can still answer before it closes: half-close is kept.
  ExpectForwards(*pair, Direction::kReplies, "+OK");
  pair->server.Reset();
  EXPECT_EQ(ReadSome(pair->client.get(), kLong).kind, ReadOutcome::kEof);
  ASSERT_OK(proxy_.WaitFor([](const ProxyStats& s) { return s.live == 0; },
                           kLong, "connection closed"));
}

TEST_F(FaultProxyTest, ResetAllClosesBothSidesWithRst) {
  absl::StatusOr<Pair> a = Connect();
  ASSERT_OK(a);
  absl::StatusOr<Pair> b = Connect();
  ASSERT_OK(b);
  proxy_.SetFault(Direction::kRequests, Fault::Stall());
  WriteAll(a->client.get(), "pending");
  ASSERT_OK(proxy_.WaitForReceived(Direction::kRequests, 7, kLong));

  proxy_.ResetAll();
  EXPECT_EQ(proxy_.stats().live, 0u);
  EXPECT_EQ(proxy_.stats().requests.dropped, 7u);
  for (const Pair* p : {&*a, &*b}) {
    ExpectReset(p->client.get(), "client");
    ExpectReset(p->server.get(), "server");
  }
  // New connections are not affected.
  absl::StatusOr<Pair> c = Connect();
  ASSERT_OK(c);
  proxy_.SetFault(Direction::kRequests, Fault::Pass());
  ExpectForwards(*c, Direction::kRequests, "fresh");
}

TEST_F(FaultProxyTest, ResetConnectionClosesOnlyThatOne) {
  absl::StatusOr<Pair> a = Connect();
  ASSERT_OK(a);
  absl::StatusOr<Pair> b = Connect();
  ASSERT_OK(b);
  ASSERT_EQ(b->id, a->id + 1);
  ASSERT_OK(proxy_.ResetConnection(a->id));
  ExpectReset(a->client.get(), "reset client");
  ExpectReset(a->server.get(), "reset server");
  ExpectForwards(*b, Direction::kRequests, "still");
  ExpectForwards(*b, Direction::kReplies, "here");
  ASSERT_EQ(proxy_.Connections().size(), 1u);
  EXPECT_EQ(proxy_.Connections()[0].id, b->id);
  EXPECT_EQ(proxy_.ResetConnection(a->id).code(), absl::StatusCode::kNotFound);
}

TEST_F(FaultProxyTest, ConnectionFaultAffectsOnlyThatConnection) {
  absl::StatusOr<Pair> a = Connect();
  ASSERT_OK(a);
  absl::StatusOr<Pair> b = Connect();
  ASSERT_OK(b);
  ASSERT_OK(
      proxy_.SetConnectionFault(a->id, Direction::kReplies, Fault::Stall()));
  std::vector<ConnectionInfo> conns = proxy_.Connections();
  ASSERT_EQ(conns.size(), 2u);
  EXPECT_EQ(conns[0].replies, Fault::Stall());
  EXPECT_EQ(conns[1].replies, Fault::Pass());

  WriteAll(a->server.get(), "to a");
  ExpectForwards(*b, Direction::kReplies, "to b");
  ExpectForwards(*a, Direction::kRequests, "a asks");  // the other way passes
  ExpectQuiet(a->client.get(), "stalled connection");
  ASSERT_OK(
      proxy_.SetConnectionFault(a->id, Direction::kReplies, Fault::Pass()));
  absl::StatusOr<std::string> got = ReadExactly(a->client.get(), 4);
  ASSERT_OK(got);
  EXPECT_EQ(*got, "to a");
  EXPECT_EQ(
      proxy_.SetConnectionFault(99, Direction::kReplies, Fault::Drop()).code(),
      absl::StatusCode::kNotFound);
}

TEST_F(FaultProxyTest, GlobalFaultAppliesToOpenAndLaterConnections) {
  absl::StatusOr<Pair> a = Connect();
  ASSERT_OK(a);
  proxy_.SetFault(Direction::kReplies, Fault::Drop());
  absl::StatusOr<Pair> b = Connect();
  ASSERT_OK(b);
  for (const ConnectionInfo& c : proxy_.Connections()) {
    EXPECT_EQ(c.replies, Fault::Drop()) << c.id;
    EXPECT_EQ(c.requests, Fault::Pass()) << c.id;
  }
  WriteAll(b->server.get(), "gone");
  ASSERT_OK(proxy_.WaitForReceived(Direction::kReplies, 4, kLong));
  ExpectQuiet(b->client.get(), "later connection");
  EXPECT_EQ(proxy_.Connections()[1].reply_bytes.dropped, 4u);
}

TEST_F(FaultProxyTest, NewUpstreamServesOnlyNewConnections) {
  absl::StatusOr<Pair> old_conn = Connect();
  ASSERT_OK(old_conn);
  Server promoted;
  ASSERT_OK(proxy_.SetUpstream("127.0.0.1", promoted.port()));
  absl::StatusOr<Pair> new_conn = Connect(promoted);
  ASSERT_OK(new_conn);
  EXPECT_FALSE(server_.Accept(kQuiet).ok()) << "the old server got a client";

  // The old client still talks to the demoted server.
  ExpectForwards(*old_conn, Direction::kRequests, "SET k old");
  ExpectForwards(*new_conn, Direction::kRequests, "SET k new");
  std::vector<ConnectionInfo> conns = proxy_.Connections();
  ASSERT_EQ(conns.size(), 2u);
  EXPECT_EQ(conns[0].upstream, absl::StrCat("127.0.0.1:", server_.port()));
  EXPECT_EQ(conns[1].upstream, absl::StrCat("127.0.0.1:", promoted.port()));
  EXPECT_EQ(proxy_.SetUpstream("127.0.0.1", 0).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(FaultProxyTest, WaitHelpersReturnWhenReachedAndTimeOutOtherwise) {
  absl::StatusOr<Pair> pair = Connect();
  ASSERT_OK(pair);
  ASSERT_OK(proxy_.WaitForAccepted(1, kLong));
  // A waiter is woken by traffic of another thread.
  std::thread writer([&] { WriteAll(pair->client.get(), "12345"); });
  ASSERT_OK(proxy_.WaitForForwarded(Direction::kRequests, 5, kLong));
  writer.join();
  EXPECT_EQ(proxy_.stats().requests.forwarded, 5u);

  absl::Status late = proxy_.WaitForForwarded(Direction::kReplies, 1000,
                                              absl::Milliseconds(50));
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(late.message(), HasSubstr("1000 bytes of replies forwarded"));
  EXPECT_EQ(proxy_.WaitForAccepted(2, absl::Milliseconds(50)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(
      proxy_.WaitForReceived(Direction::kRequests, 6, absl::Milliseconds(50))
          .code(),
      absl::StatusCode::kDeadlineExceeded);
}

TEST(FaultProxyLifecycle, MisuseIsReported) {
  FaultProxy proxy;
  EXPECT_EQ(proxy.port(), 0);
  EXPECT_EQ(proxy.SetAdmission(Admission::kRefuse).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(proxy.Partition().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(proxy.Start("127.0.0.1", 70000).code(),
            absl::StatusCode::kInvalidArgument);
  Server server;
  ASSERT_OK(proxy.Start("127.0.0.1", server.port()));
  EXPECT_EQ(proxy.Start("127.0.0.1", server.port()).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Fault::Delay(absl::Milliseconds(5)).ToString(), "delay(5ms)");
}

// Every descriptor the proxy opens is close-on-exec, and its destructor
// closes them all, resetting open connections.
TEST(FaultProxyLifecycle, DescriptorsAreCloseOnExecAndClosedAtTheEnd) {
  Server server;
  const std::set<int> before = OpenFds();
  auto proxy = std::make_unique<FaultProxy>();
  ASSERT_OK(proxy->Start("127.0.0.1", server.port()));
  Connected client = ConnectTo(proxy->port());
  ASSERT_EQ(client.error, 0);
  absl::StatusOr<Fd> upstream = server.Accept();
  ASSERT_OK(upstream);
  ASSERT_OK(proxy->SetAdmission(Admission::kBlackhole));  // dummies too

  for (int fd : OpenFds()) {
    if (before.contains(fd)) continue;
    EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC) << "fd " << fd;
  }
  proxy.reset();
  ExpectReset(client.fd.get(), "client of a destroyed proxy");
  ExpectReset(upstream->get(), "server of a destroyed proxy");
  client.fd.Reset();
  upstream->Reset();
  EXPECT_EQ(OpenFds(), before);
}

}  // namespace
}  // namespace dlock::test
