// Copyright dlock authors. What the unit tests of FaultProxy share
// (fault_proxy_test.cc, fault_proxy_direction_test.cc and
// fault_proxy_admission_test.cc). They use real loopback sockets: the
// test plays both the client and the server (a listener it accepts
// from), so it controls and reads both ends of every connection.
//
// Bounds are generous because the machine may be loaded: waits for something
// that must happen allow kLong; checks that something does NOT happen watch
// for kQuiet, which can miss a late byte but never fails a correct proxy.
#ifndef DLOCK_TESTS_UNIT_FAULT_PROXY_TEST_UTIL_H_
#define DLOCK_TESTS_UNIT_FAULT_PROXY_TEST_UTIL_H_

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
#include "fault_proxy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "status_testing.h"

namespace dlock::test {

// For parameterized test names and failure messages.
inline void PrintTo(Direction d, std::ostream* os) {
  *os << (d == Direction::kRequests ? "requests" : "replies");
}

inline constexpr absl::Duration kLong = absl::Seconds(20);
inline constexpr absl::Duration kQuiet = absl::Milliseconds(300);
using Clock = std::chrono::steady_clock;

inline absl::Duration Since(Clock::time_point start) {
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

inline sockaddr_in Loopback(int port) {
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

inline PendingConnect StartConnect(int port) {
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
inline int Finish(PendingConnect& pending, absl::Duration timeout) {
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

inline Connected ConnectTo(int port, absl::Duration timeout = kLong) {
  PendingConnect pending = StartConnect(port);
  int error = Finish(pending, timeout);
  return {std::move(pending.fd), error};
}

inline void WriteAll(int fd, const std::string& data) {
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
inline ReadOutcome ReadSome(int fd, absl::Duration timeout) {
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
inline absl::StatusOr<std::string> ReadExactly(int fd, size_t n,
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
inline void ExpectQuiet(int fd, const char* what,
                        absl::Duration quiet = kQuiet) {
  ReadOutcome r = ReadSome(fd, quiet);
  EXPECT_EQ(r.kind, ReadOutcome::kTimeout)
      << what << ": expected silence, got kind " << r.kind << " data '"
      << r.data << "' error " << std::strerror(r.error);
}

inline void ExpectReset(int fd, const char* what) {
  ReadOutcome r = ReadSome(fd, kLong);
  EXPECT_EQ(r.kind, ReadOutcome::kError) << what << ": got kind " << r.kind;
  EXPECT_EQ(r.error, ECONNRESET) << what << ": " << std::strerror(r.error);
}

// A connection the proxy accepts and resets at once: the RST may already be
// there when connect() completes, or come on the first read.
inline void ExpectConnectThenReset(int port, const char* what) {
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

inline std::set<int> OpenFds() {
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
inline void ExpectForwards(const Pair& pair, Direction d,
                           const std::string& data) {
  WriteAll(pair.sender(d), data);
  absl::StatusOr<std::string> got = ReadExactly(pair.receiver(d), data.size());
  ASSERT_OK(got);
  EXPECT_EQ(*got, data);
}

}  // namespace dlock::test

#endif  // DLOCK_TESTS_UNIT_FAULT_PROXY_TEST_UTIL_H_
