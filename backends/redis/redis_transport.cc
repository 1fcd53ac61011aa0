#include "redis_transport.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "redis_tls.h"

namespace dlock::redis {

Deadline DeadlineIn(absl::Duration timeout) {
  return std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
}

Ready WaitFor(int fd, short events, Deadline deadline, int wake_fd) {
  while (true) {
    int timeout_ms = -1;
    if (deadline != kNoDeadline) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      timeout_ms = static_cast<int>(std::clamp<int64_t>(
          left.count(), 0, std::numeric_limits<int>::max()));
    }
    pollfd fds[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    const int n = poll(fds, wake_fd >= 0 ? 2 : 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (wake_fd >= 0 && fds[1].revents != 0) return Ready::kWoken;
    if (n != 0) return Ready::kReady;
    // Data already there wins over a deadline that has just passed.
    if (std::chrono::steady_clock::now() >= deadline) return Ready::kTimedOut;
  }
}

Stream::~Stream() { close(fd_); }

void Stream::Shutdown() { shutdown(fd_, SHUT_RDWR); }

absl::StatusOr<bool> Stream::Await(short events, Deadline deadline,
                                   int wake_fd) const {
  switch (WaitFor(fd_, events, deadline, wake_fd)) {
    case Ready::kWoken:
      return false;
    case Ready::kTimedOut:
      // Why it waited, in the words a reader of the message needs.
      return absl::DeadlineExceededError((events & POLLOUT) != 0
                                             ? "the server took no more bytes"
                                             : "no bytes came");
    case Ready::kReady:
      break;
  }
  return true;
}

namespace {

absl::Status Lost(const std::string& endpoint, absl::string_view why) {
  return absl::UnavailableError(
      absl::StrCat("lost the connection to redis at ", endpoint, ": ", why));
}

class Plain : public Stream {
 public:
  Plain(int fd, std::string endpoint) : Stream(fd, std::move(endpoint)) {}

  absl::Status Write(absl::string_view bytes, Deadline deadline) override {
    while (!bytes.empty()) {
      // MSG_NOSIGNAL: a write to a connection the server has reset raises
      // SIGPIPE otherwise, whose default action kills the host process.
      const ssize_t n =
          send(fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        bytes.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (absl::StatusOr<bool> ready = Await(POLLOUT, deadline, -1);
            !ready.ok()) {
          return ready.status();
        }
        continue;
      }
      return Lost(endpoint(), n < 0 ? std::strerror(errno) : "closed");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> Read(char* buf, size_t size, Deadline deadline,
                              int wake_fd) override {
    while (true) {
      // poll() first: a reader usually waits for a reply not yet sent.
      absl::StatusOr<bool> ready = Await(POLLIN, deadline, wake_fd);
      if (!ready.ok()) return ready.status();
      if (!*ready) return 0;
      const ssize_t n = recv(fd(), buf, size, MSG_DONTWAIT);
      if (n > 0) return static_cast<size_t>(n);
      if (n == 0) return Lost(endpoint(), "the server closed it");
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return Lost(endpoint(), std::strerror(errno));
    }
  }

  bool tls() const override { return false; }
};

// Keeps the connection probed while idle, as hiredis's redisKeepAlive()
// did: a server that vanished without a word (its host powered off) is
// found within about half a minute even with no command in flight.
void EnableKeepAlive(int fd) {
  int on = 1;
  int idle = 15;
  int interval = 5;
  int count = 3;
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

// connect() of a non-blocking socket, waited for until `deadline` or
// `cancel_fd`. 0 when connected, else an errno (ECANCELED when cancelled).
int ConnectSocket(int fd, const addrinfo& a, Deadline deadline, int cancel_fd) {
  if (connect(fd, a.ai_addr, a.ai_addrlen) == 0) return 0;
  int error = errno;
  while (error == EINPROGRESS || error == EINTR) {
    switch (WaitFor(fd, POLLOUT, deadline, cancel_fd)) {
      case Ready::kWoken:
        return ECANCELED;
      case Ready::kTimedOut:
        return ETIMEDOUT;
      case Ready::kReady:
        break;
    }
    socklen_t len = sizeof(error);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = errno;
  }
  return error;
}

// A connected TCP socket to host:port, non-blocking. Every address the name
// resolves to is dialed in turn, within `deadline` in all. The socket is
// close-on-exec from the start: set afterwards, a fork() and exec() on
// another thread in between would hand the connection to the new program.
absl::StatusOr<int> ConnectTcp(const std::string& host, int port,
                               const std::string& endpoint, Deadline deadline,
                               int cancel_fd) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  const std::string service = absl::StrCat(port);
  if (const int rc =
          getaddrinfo(host.c_str(), service.c_str(), &hints, &addresses);
      rc != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot connect to redis at ", endpoint, ": ", gai_strerror(rc)));
  }
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = addresses; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    const int error = ConnectSocket(fd, *a, deadline, cancel_fd);
    if (error == ECANCELED) {
      close(fd);
      freeaddrinfo(addresses);
      return absl::CancelledError(
          absl::StrCat("stopped connecting to redis at ", endpoint));
    }
    if (error != 0) {
      why = std::strerror(error);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(addresses);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot connect to redis at ", endpoint, ": ", why));
  }
  // Each command goes out at once, not held back to fill a segment.
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    const int error = errno;
    close(fd);
    return absl::InternalError(
        absl::StrCat("cannot set up the connection to redis at ", endpoint,
                     ": ", std::strerror(error)));
  }
  EnableKeepAlive(fd);
  return fd;
}

}  // namespace

std::unique_ptr<Stream> PlainStream(int fd, std::string endpoint) {
  if (const int flags = fcntl(fd, F_GETFL); flags >= 0) {
    (void)fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  }
  return std::make_unique<Plain>(fd, std::move(endpoint));
}

absl::StatusOr<std::unique_ptr<Stream>> Dial(const std::string& host, int port,
                                             const TlsSettings& tls,
                                             const std::string& endpoint,
                                             Deadline deadline, int cancel_fd) {
  absl::StatusOr<int> fd =
      ConnectTcp(host, port, endpoint, deadline, cancel_fd);
  if (!fd.ok()) return fd.status();
  if (tls.context != nullptr) {
    return StartTls(*fd, host, tls, endpoint, deadline, cancel_fd);
  }
  return std::unique_ptr<Stream>(std::make_unique<Plain>(*fd, endpoint));
}

}  // namespace dlock::redis
