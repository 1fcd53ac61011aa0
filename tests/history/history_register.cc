#include "history_register.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dlock::test {
namespace {

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RegisterServer>> RegisterServer::Start() {
  std::unique_ptr<RegisterServer> server(new RegisterServer);
  server->listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof(addr);
  if (server->listen_fd_ < 0 ||
      bind(server->listen_fd_, reinterpret_cast<sockaddr*>(&addr),
           sizeof(addr)) != 0 ||
      listen(server->listen_fd_, 64) != 0 ||
      getsockname(server->listen_fd_, reinterpret_cast<sockaddr*>(&addr),
                  &len) != 0) {
    return absl::InternalError(
        absl::StrCat("register: cannot listen on loopback: ", errno));
  }
  server->port_ = ntohs(addr.sin_port);
  server->stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

RegisterServer::~RegisterServer() {
  uint64_t one = 1;
  if (stop_fd_ >= 0) (void)!write(stop_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

void RegisterServer::Serve() {
  std::map<int, std::string> clients;  // fd -> unread input
  while (true) {
    std::vector<pollfd> fds = {{stop_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const auto& [fd, input] : clients) fds.push_back({fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), -1) < 0) continue;
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) clients[fd];
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int fd = fds[i].fd;
      char buf[512];
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) {
        close(fd);
        clients.erase(fd);
        continue;
      }
      std::string& input = clients[fd];
      input.append(buf, static_cast<size_t>(n));
      size_t newline;
      while ((newline = input.find('\n')) != std::string::npos) {
        const std::string reply = Handle(input.substr(0, newline)) + "\n";
        input.erase(0, newline + 1);
        (void)!write(fd, reply.data(), reply.size());
      }
    }
  }
  for (const auto& [fd, input] : clients) close(fd);
}

std::string RegisterServer::Handle(const std::string& line) {
  std::vector<std::string> words = absl::StrSplit(line, ' ');
  // The key is the optional last word of every request.
  auto key_at = [&](size_t i, int& key) {
    key = 0;
    return words.size() == i ||
           (words.size() == i + 1 && absl::SimpleAtoi(words[i], &key));
  };
  int key = 0;
  absl::MutexLock lock(&mu_);
  if (words[0] == "W" && words.size() >= 3 && key_at(3, key)) {
    RegisterWrite w{.at_ns = MonoNs(), .key = key};
    if (!absl::SimpleAtoi(words[1], &w.token) ||
        !absl::SimpleAtoi(words[2], &w.worker)) {
      return "ERR";
    }
    Cell& cell = cells_[key];
    w.accepted = w.token >= cell.max_token;
    if (w.accepted) {
      cell.max_token = w.token;
      cell.last_writer = w.worker;
    }
    writes_.push_back(w);
    return w.accepted ? "OK" : "STALE";
  }
  if (words[0] == "G" && key_at(1, key)) {
    return absl::StrCat(cells_[key].counter);
  }
  int64_t value = 0;
  if (words[0] == "S" && words.size() >= 2 && key_at(2, key) &&
      absl::SimpleAtoi(words[1], &value)) {
    Cell& cell = cells_[key];
    cell.counter = value;
    ++cell.sets;
    return "OK";
  }
  return "ERR";
}

std::vector<RegisterWrite> RegisterServer::Writes() const {
  absl::MutexLock lock(&mu_);
  return writes_;
}

RegisterServer::Cell RegisterServer::CellOf(int key) const {
  absl::MutexLock lock(&mu_);
  auto it = cells_.find(key);
  return it == cells_.end() ? Cell{} : it->second;
}

int64_t RegisterServer::counter(int key) const { return CellOf(key).counter; }
int64_t RegisterServer::sets(int key) const { return CellOf(key).sets; }
uint64_t RegisterServer::max_token(int key) const {
  return CellOf(key).max_token;
}
int RegisterServer::last_writer(int key) const {
  return CellOf(key).last_writer;
}

RegisterClient::~RegisterClient() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::string> RegisterClient::Call(const std::string& request) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (fd_ < 0) {
      fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr = Loopback(port_);
      if (fd_ < 0 ||
          connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        if (fd_ >= 0) close(fd_);
        fd_ = -1;
        continue;
      }
      buffer_.clear();
    }
    const std::string line = request + "\n";
    if (write(fd_, line.data(), line.size()) !=
        static_cast<ssize_t>(line.size())) {
      close(fd_);
      fd_ = -1;
      continue;
    }
    size_t newline;
    while ((newline = buffer_.find('\n')) == std::string::npos) {
      char buf[256];
      const ssize_t n = read(fd_, buf, sizeof(buf));
      if (n <= 0) break;
      buffer_.append(buf, static_cast<size_t>(n));
    }
    if (newline == std::string::npos) {
      close(fd_);
      fd_ = -1;
      continue;
    }
    std::string reply = buffer_.substr(0, newline);
    buffer_.erase(0, newline + 1);
    return reply;
  }
  return absl::UnavailableError("the history register cannot be reached");
}

absl::StatusOr<bool> RegisterClient::Write(uint64_t token, int worker,
                                           int key) {
  absl::StatusOr<std::string> reply =
      Call(absl::StrCat("W ", token, " ", worker, " ", key));
  if (!reply.ok()) return reply.status();
  return *reply == "OK";
}

absl::StatusOr<int64_t> RegisterClient::Get(int key) {
  absl::StatusOr<std::string> reply = Call(absl::StrCat("G ", key));
  int64_t value = 0;
  if (!reply.ok()) return reply.status();
  if (!absl::SimpleAtoi(*reply, &value)) {
    return absl::InternalError("register: bad reply");
  }
  return value;
}

absl::Status RegisterClient::Set(int64_t value, int key) {
  absl::StatusOr<std::string> reply = Call(absl::StrCat("S ", value, " ", key));
  return reply.ok() ? absl::OkStatus() : reply.status();
}

}  // namespace dlock::test
