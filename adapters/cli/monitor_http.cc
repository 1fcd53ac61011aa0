#include "monitor_http.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dlock::cli {
namespace {

// How long a connection may take to send its request: a scraper sends it
// at once; a stuck client must not hold the only thread.
constexpr int kRequestTimeoutMs = 2000;
constexpr size_t kMaxRequest = 8192;
// How often the accept loop looks at stopping_.
constexpr int kStopCheckMs = 100;

void WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the scraper went away: nothing to tell it
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text) {
  const size_t colon = text.rfind(':');
  ListenAddress address;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(text.substr(colon + 1), &address.port) ||
      address.port < 0 || address.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen: '", text,
                     "' is not host:port (e.g. 127.0.0.1:9464, or :9464 for "
                     "every address)"));
  }
  address.host = std::string(text.substr(0, colon));
  // [::1]:9464
  if (absl::StartsWith(address.host, "[") &&
      absl::EndsWith(address.host, "]")) {
    address.host = address.host.substr(1, address.host.size() - 2);
  }
  return address;
}

absl::StatusOr<std::unique_ptr<MonitorHttpServer>> MonitorHttpServer::Start(
    const std::string& host, int port, std::function<std::string()> render) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(),
                           service.c_str(), &hints, &found);
      rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-listen: cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  std::string error = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 16) == 0) break;
    error = strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        "--metrics-listen: cannot listen on ", host, ":", port, ": ", error));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::unique_ptr<MonitorHttpServer>(
      new MonitorHttpServer(fd, bound_port, std::move(render)));
}

MonitorHttpServer::MonitorHttpServer(int listen_fd, int port,
                                     std::function<std::string()> render)
    : listen_fd_(listen_fd), port_(port), render_(std::move(render)) {
  thread_ = std::thread([this] { Serve(); });
}

MonitorHttpServer::~MonitorHttpServer() {
  stopping_ = true;
  thread_.join();
  close(listen_fd_);
}

void MonitorHttpServer::Serve() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, kStopCheckMs) <= 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Answer(fd);
    close(fd);
  }
}

void MonitorHttpServer::Answer(int fd) {
  std::string request;
  char buf[1024];
  while (!absl::StrContains(request, "\r\n\r\n") &&
         request.size() < kMaxRequest) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, kRequestTimeoutMs) <= 0) return;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return;
    request.append(buf, static_cast<size_t>(n));
  }
  std::string status = "200 OK";
  std::string type = "text/plain; version=0.0.4; charset=utf-8";
  std::string body;
  if (absl::StartsWith(request, "GET /metrics ") ||
      absl::StartsWith(request, "GET /metrics?")) {
    body = render_();
  } else if (absl::StartsWith(request, "GET ")) {
    status = "404 Not Found";
    type = "text/plain; charset=utf-8";
    body = "dlock monitor serves GET /metrics\n";
  } else {
    status = "405 Method Not Allowed";
    type = "text/plain; charset=utf-8";
    body = "dlock monitor serves GET /metrics\n";
  }
  WriteAll(fd, absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", type,
                            "\r\nContent-Length: ", body.size(),
                            "\r\nConnection: close\r\n\r\n", body));
}

}  // namespace dlock::cli
