#include "zk_four_letter.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dlock::zk {
namespace {

// Closes the descriptor when it goes out of scope.
struct Socket {
  int fd = -1;
  ~Socket() {
    if (fd >= 0) close(fd);
  }
};

// Waits until `fd` is ready for `events` or the deadline passes.
bool WaitReady(int fd, short events, absl::Time deadline) {
  for (;;) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) return false;
    pollfd p = {fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(left));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// Connects `sock` to `host_port` (host:port, the host maybe in brackets),
// waiting until `deadline` for it to complete.
absl::Status ConnectTo(absl::string_view host_port, absl::string_view where,
                       absl::Time deadline, Socket& sock) {
  const size_t colon = host_port.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("not host:port: '", host_port, "'"));
  }
  std::string host(host_port.substr(0, colon));
  const std::string port(host_port.substr(colon + 1));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", where));
  }
  sock.fd = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                   found->ai_protocol);
  const int rc =
      sock.fd < 0 ? -1 : connect(sock.fd, found->ai_addr, found->ai_addrlen);
  const int connect_errno = errno;
  freeaddrinfo(found);
  // A nonblocking connect interrupted by a signal goes on as one in
  // progress does.
  const bool pending = connect_errno == EINPROGRESS || connect_errno == EINTR;
  if (rc != 0 &&
      (sock.fd < 0 || !pending || !WaitReady(sock.fd, POLLOUT, deadline))) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", where));
  }
  int error = 0;
  socklen_t len = sizeof(error);
  getsockopt(sock.fd, SOL_SOCKET, SO_ERROR, &error, &len);
  if (error != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot connect to ", where, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

// Everything the peer sends until it closes, by `deadline`; nullopt when
// the deadline passed, Unavailable when the connection broke.
absl::StatusOr<std::optional<std::string>> ReadAll(int fd,
                                                   absl::string_view where,
                                                   absl::Time deadline) {
  std::string out;
  char buf[4096];
  for (;;) {
    if (!WaitReady(fd, POLLIN, deadline)) return std::nullopt;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return std::optional<std::string>(std::move(out));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(absl::StrCat("lost ", where));
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

absl::StatusOr<std::string> FourLetterWord(absl::string_view host_port,
                                           absl::string_view word,
                                           absl::Duration timeout) {
  const std::string where = absl::StrCat("ZooKeeper at ", host_port);
  // One deadline for the connection and the answer.
  const absl::Time deadline = absl::Now() + timeout;
  Socket sock;
  if (absl::Status s = ConnectTo(host_port, where, deadline, sock); !s.ok()) {
    return s;
  }
  if (send(sock.fd, word.data(), word.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(word.size())) {
    return absl::UnavailableError(absl::StrCat("cannot write to ", where));
  }
  absl::StatusOr<std::optional<std::string>> out =
      ReadAll(sock.fd, where, deadline);
  if (!out.ok()) return out.status();
  if (!out->has_value()) {
    return absl::UnavailableError(absl::StrCat(where, " did not answer '", word,
                                               "' within ",
                                               absl::FormatDuration(timeout)));
  }
  if (absl::StrContains(**out, "not in the whitelist") ||
      absl::StrContains(**out, "not executed")) {
    return absl::UnimplementedError(absl::StrCat(
        where, " refuses '", word, "': add it to 4lw.commands.whitelist"));
  }
  return **std::move(out);
}

absl::StatusOr<int64_t> MntrValue(absl::string_view mntr,
                                  absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(mntr, '\n')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits('\t', 1));
    int64_t value = 0;
    if (kv.first == key &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(kv.second), &value)) {
      return value;
    }
  }
  return absl::InternalError(absl::StrCat("mntr did not report ", key));
}

}  // namespace dlock::zk
