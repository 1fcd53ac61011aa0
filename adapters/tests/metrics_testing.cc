#include "metrics_testing.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server_process.h"

namespace dlock::test {

absl::StatusOr<std::string> HttpExchange(int port, absl::string_view request) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    const std::string why = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect: ", why));
  }
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n =
        send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += n;
  }
  std::string response;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  char buffer[4096];
  while (absl::Now() < deadline) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    response.append(buffer, n);
  }
  close(fd);
  return response;
}

absl::StatusOr<std::string> HttpGet(int port, absl::string_view path) {
  return HttpExchange(
      port,
      absl::StrCat("GET ", path,
                   " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\n"));
}

std::string HttpBody(absl::string_view response) {
  const size_t end = response.find("\r\n\r\n");
  return end == absl::string_view::npos ? ""
                                        : std::string(response.substr(end + 4));
}

Result ParsePrometheus(const std::string& page) {
  absl::StatusOr<std::string> dir = MakeTempDir("dlock-metrics");
  if (!dir.ok()) return Result{-1, "", std::string(dir.status().message())};
  const std::string path = absl::StrCat(*dir, "/page.txt");
  WriteFile(path, page);
  Result r = RunProcess(
      {"/usr/bin/python3",
       absl::StrCat(kSourceDir, "/adapters/tests/parse_prometheus.py"), path});
  RemoveTree(*dir);
  return r;
}

}  // namespace dlock::test
