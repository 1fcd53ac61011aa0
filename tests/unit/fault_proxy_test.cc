// Copyright dlock authors. Unit tests of FaultProxy with real loopback
// sockets: the test plays both the client and the server (a listener it
// accepts from), so it controls and reads both ends of every connection.
//
// Bounds are generous because the machine may be loaded: waits for something
// that must happen allow kLong; checks that something does NOT happen watch
// for kQuiet, which can miss a late byte but never fails a correct proxy.
#include "fault_proxy.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "status_testing.h"

namespace dlock::test {

// For parameterized test names and failure messages.
void PrintTo(Direction d, std::ostream* os) {
  *os << (d == Direction::kRequests ? "requests" : "replies");
}

namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kLong = absl::Seconds(20);
constexpr absl::Duration kQuiet = absl::Milliseconds(300);
using Clock = std::chrono::steady_clock;

absl::Duration Since(Clock::time_point start) {
  return absl::FromChrono(Clock::now() - start);
}

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    Reset();
    fd_ = std::exchange(other.fd_, -1);
    return *this;
  }
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  return addr;
}

// Starts a non-blocking connect(); Finish() waits for it.
struct PendingConnect {
  Fd fd;
  int error = 0;  // set when connect() failed at once
};

PendingConnect StartConnect(int port) {
  PendingConnect out;
  out.fd = Fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  sockaddr_in addr = Loopback(port);
  if (connect(out.fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
          0 &&
      errno != EINPROGRESS) {
    out.error = errno;
  }
  return out;
}

// 0 once connected (the socket is made blocking again), ETIMEDOUT if the
// handshake did not complete within `timeout`, else connect()'s errno.
int Finish(PendingConnect& pending, absl::Duration timeout) {
  if (pending.error != 0) return pending.error;
  pollfd p{pending.fd.get(), POLLOUT, 0};
  if (poll(&p, 1, absl::ToInt64Milliseconds(timeout)) == 0) return ETIMEDOUT;
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(pending.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err == 0) {
    fcntl(pending.fd.get(), F_SETFL,
          fcntl(pending.fd.get(), F_GETFL) & ~O_NONBLOCK);
  }
  return err;
}

struct Connected {
  Fd fd;
  int error = 0;
};

Connected ConnectTo(int port, absl::Duration timeout = kLong) {
  PendingConnect pending = StartConnect(port);
  int error = Finish(pending, timeout);
  return {std::move(pending.fd), error};
}

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    ASSERT_GT(n, 0) << std::strerror(errno);
    done += n;
  }
}

struct ReadOutcome {
  enum Kind { kData, kTimeout, kEof, kError } kind;
  std::string data;
  int error = 0;
};

// One read that waits at most `timeout` for something to happen.
ReadOutcome ReadSome(int fd, absl::Duration timeout) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, absl::ToInt64Milliseconds(timeout)) == 0) {
    return {ReadOutcome::kTimeout};
  }
  char buf[65536];
  ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
  if (n > 0) return {ReadOutcome::kData, std::string(buf, n)};
  if (n == 0) return {ReadOutcome::kEof};
  return {ReadOutcome::kError, "", errno};
}

// Exactly `n` bytes, or an error saying what came instead.
absl::StatusOr<std::string> ReadExactly(int fd, size_t n,
                                        absl::Duration timeout = kLong) {
  std::string out;
  const Clock::time_point start = Clock::now();
  while (out.size() < n) {
    absl::Duration left = timeout - Since(start);
    pollfd p{fd, POLLIN, 0};
    if (left <= absl::ZeroDuration() ||
        poll(&p, 1, absl::ToInt64Milliseconds(left)) == 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("got ", out.size(), " of ", n, " bytes: '", out, "'"));
    }
    char buf[65536];
    ssize_t r = recv(fd, buf, std::min(sizeof(buf), n - out.size()), 0);
    if (r <= 0) {
      return absl::UnavailableError(absl::StrCat(
          "after '", out, "': ", r == 0 ? "EOF" : strerror(errno)));
    }
    out.append(buf, r);
  }
  return out;
}

// What the next read sees: data, or nothing within kQuiet, or the end.
void ExpectQuiet(int fd, const char* what, absl::Duration quiet = kQuiet) {
  ReadOutcome r = ReadSome(fd, quiet);
  EXPECT_EQ(r.kind, ReadOutcome::kTimeout)
      << what << ": expected silence, got kind " << r.kind << " data '"
      << r.data << "' error " << std::strerror(r.error);
}

void ExpectReset(int fd, const char* what) {
  ReadOutcome r = ReadSome(fd, kLong);
  EXPECT_EQ(r.kind, ReadOutcome::kError) << what << ": got kind " << r.kind;
  EXPECT_EQ(r.error, ECONNRESET) << what << ": " << std::strerror(r.error);
}

// A connection the proxy accepts and resets at once: the RST may already be
// there when connect() completes, or come on the first read.
void ExpectConnectThenReset(int port, const char* what) {
  Connected c = ConnectTo(port);
  if (c.error == ECONNRESET) return;
  ASSERT_EQ(c.error, 0) << what << ": " << std::strerror(c.error);
  ExpectReset(c.fd.get(), what);
}

// The test's stand-in for Redis & co: a listener the test accepts from.
class Server {
 public:
  Server() : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr = Loopback(0);
    socklen_t len = sizeof(addr);
    if (bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(fd_.get(), 64) != 0 ||
        getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "test server: " << std::strerror(errno);
    }
    port_ = ntohs(addr.sin_port);
  }
  int port() const { return port_; }

  // The next connection the proxy made, or DeadlineExceeded.
  absl::StatusOr<Fd> Accept(absl::Duration timeout = kLong) {
    pollfd p{fd_.get(), POLLIN, 0};
    if (poll(&p, 1, absl::ToInt64Milliseconds(timeout)) == 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("no connection reached the server on port ", port_,
                       " within ", absl::FormatDuration(timeout)));
    }
    return Fd(accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  }

 private:
  Fd fd_;
  int port_ = 0;
};

// Both ends of one connection through the proxy.
struct Pair {
  int sender(Direction d) const {
    return d == Direction::kRequests ? client.get() : server.get();
  }
  int receiver(Direction d) const {
    return d == Direction::kRequests ? server.get() : client.get();
  }
  Fd client;
  Fd server;
  uint64_t id = 0;
};

std::set<int> OpenFds() {
  std::set<int> fds;
  DIR* dir = opendir("/proc/self/fd");
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') fds.insert(atoi(e->d_name));
  }
  fds.erase(dirfd(dir));
  closedir(dir);
  return fds;
}

class FaultProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(proxy_.Start("127.0.0.1", server_.port()));
  }

  // A connection from a new client through the proxy to `server`.
  absl::StatusOr<Pair> Connect(Server& server) {
    Pair pair;
    Connected c = ConnectTo(proxy_.port());
    if (c.error != 0) {
      return absl::UnavailableError(
          absl::StrCat("connect to the proxy: ", std::strerror(c.error)));
    }
    pair.client = std::move(c.fd);
    absl::StatusOr<Fd> accepted = server.Accept();
    if (!accepted.ok()) return accepted.status();
    pair.server = *std::move(accepted);
    // The proxy counts a connection before it dials the upstream.
    pair.id = proxy_.stats().accepted;
    return pair;
  }
  absl::StatusOr<Pair> Connect() { return Connect(server_); }

  Server server_;
  FaultProxy proxy_;
};

// Checks that `pair` forwards `data` in direction `d`.
void ExpectForwards(const Pair& pair, Direction d, const std::string& data) {
  WriteAll(pair.sender(d), data);
  absl::StatusOr<std::string> got = ReadExactly(pair.receiver(d), data.size());
  ASSERT_OK(got);
  EXPECT_EQ(*got, data);
}

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
