#include "dlock/adapters/metrics_http.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "dlock/adapters/metrics.h"

namespace dlock {
namespace {

// A request head longer than this is not a scrape.
constexpr size_t kMaxHead = 8192;

std::string Response(absl::string_view status, absl::string_view content_type,
                     absl::string_view extra_headers, absl::string_view body) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\n",
                      extra_headers, "Connection: close\r\n\r\n", body);
}

void SetNonBlocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    absl::string_view host, int port, std::function<std::string()> render) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port ", port, " is not in 0..65535"));
  }
  if (!render) {
    return absl::InvalidArgumentError("the metrics server needs a renderer");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string host_text(host);
  const std::string port_text = absl::StrCat(port);
  if (int rc = getaddrinfo(host_text.empty() ? nullptr : host_text.c_str(),
                           port_text.c_str(), &hints, &found);
      rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics host '", host, "' does not resolve: ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 64) == 0) break;
    error = std::strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", host, ":", port, ": ", error));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  const int bound_port =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  // Several threads accept: one that loses the race must not block.
  SetNonBlocking(fd);
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics: pipe: ", why));
  }
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer(
      fd, wake[0], wake[1], bound_port, std::move(render)));
  absl::MutexLock lock(&server->stop_mu_);
  for (int i = 0; i < kServingThreads; ++i) {
    server->threads_.emplace_back([s = server.get()] { s->ServeLoop(); });
  }
  return server;
}

MetricsHttpServer::MetricsHttpServer(int listen_fd, int wake_read,
                                     int wake_write, int port,
                                     std::function<std::string()> render)
    : listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      port_(port),
      render_(std::move(render)) {}

MetricsHttpServer::~MetricsHttpServer() {
  Stop();
  close(listen_fd_);
  close(wake_read_);
  close(wake_write_);
}

void MetricsHttpServer::Stop() {
  absl::MutexLock lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  // Never read: the pipe stays readable, so every poll() returns at once.
  const char byte = 0;
  while (write(wake_write_, &byte, 1) < 0 && errno == EINTR) {
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

bool MetricsHttpServer::WaitFor(int fd, short events,
                                absl::Time deadline) const {
  while (true) {
    pollfd fds[2] = {{.fd = fd, .events = events, .revents = 0},
                     {.fd = wake_read_, .events = POLLIN, .revents = 0}};
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    const int ms = deadline == absl::InfiniteFuture()
                       ? -1
                       : static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
    const int n = poll(fds, 2, ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || fds[1].revents != 0) return false;
    if (fds[0].revents != 0) return true;
  }
}

void MetricsHttpServer::ServeLoop() {
  while (WaitFor(listen_fd_, POLLIN, absl::InfiniteFuture())) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // another thread took it, or the client left
    SetNonBlocking(fd);
    Serve(fd);
    close(fd);
  }
}

void MetricsHttpServer::Serve(int fd) {
  const absl::Time deadline = absl::Now() + kRequestTimeout;
  std::string head;
  char buffer[2048];
  while (!absl::StrContains(head, "\r\n\r\n") &&
         !absl::StrContains(head, "\n\n")) {
    if (head.size() > kMaxHead || !WaitFor(fd, POLLIN, deadline)) return;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return;
    head.append(buffer, n);
  }
  const std::string response = Respond(head);
  size_t sent = 0;
  while (sent < response.size()) {
    const ssize_t n =
        send(fd, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += n;
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!WaitFor(fd, POLLOUT, deadline)) return;
    } else {
      return;
    }
  }
  // Lets the client read to the end before the close resets anything.
  shutdown(fd, SHUT_WR);
}

std::string MetricsHttpServer::Respond(absl::string_view head) const {
  const absl::string_view request_line =
      head.substr(0, head.find_first_of("\r\n"));
  const std::vector<absl::string_view> parts =
      absl::StrSplit(request_line, ' ', absl::SkipEmpty());
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.")) {
    return Response("400 Bad Request", "text/plain", "",
                    "a request line is METHOD PATH HTTP/1.x\n");
  }
  const absl::string_view path = parts[1].substr(0, parts[1].find('?'));
  if (path != "/metrics") {
    return Response("404 Not Found", "text/plain", "",
                    "not found: the metrics are at /metrics\n");
  }
  if (parts[0] != "GET") {
    return Response("405 Method Not Allowed", "text/plain", "Allow: GET\r\n",
                    "only GET is served\n");
  }
  std::string body;
  try {
    body = render_();
  } catch (const std::exception& e) {
    return Response(
        "500 Internal Server Error", "text/plain", "",
        absl::StrCat("rendering the metrics failed: ", e.what(), "\n"));
  }
  return Response("200 OK", PrometheusMetrics::kContentType, "", body);
}

}  // namespace dlock
