// Copyright dlock authors. FaultProxy's control side: start, faults,
// admission of new connections (the listener and the blackhole), resets and
// counters. The event loop that moves the bytes is in fault_proxy_loop.cc.
#include "fault_proxy.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace dlock::test {
namespace {

const char* Name(Direction d) {
  return d == Direction::kRequests ? "requests" : "replies";
}

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  return addr;
}

// A socket bound to 127.0.0.1:port (0: any free port) with SO_REUSEPORT,
// which lets the proxy bind its port again while it holds it (see
// reserve_fd_) and nobody else bind it.
absl::StatusOr<int> BindLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  sockaddr_in addr = Loopback(port);
  if (fd < 0 ||
      setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
      bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    absl::Status s = Errno(absl::StrCat("binding 127.0.0.1:", port));
    if (fd >= 0) close(fd);
    return s;
  }
  return fd;
}

int LocalPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

// The kernel drops SYNs once ack_backlog > max_ack_backlog; TCP_INFO reports
// both for a listening socket.
bool AcceptQueueFull(int listen_fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (getsockopt(listen_fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) {
    return false;
  }
  return info.tcpi_unacked > info.tcpi_sacked;
}

}  // namespace

std::string Fault::ToString() const {
  if (kind == Kind::kTrickle) {
    return absl::StrCat("trickle(", piece, " bytes every ",
                        absl::FormatDuration(delay), ")");
  }
  if (kind == Kind::kDelay) {
    return absl::StrCat("delay(", absl::FormatDuration(delay), ")");
  }
  return kind == Kind::kPass ? "pass" : kind == Kind::kStall ? "stall" : "drop";
}

FaultProxy::FaultProxy() : FaultProxy(Options()) {}
FaultProxy::FaultProxy(Options options) : options_(options) {}

FaultProxy::~FaultProxy() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  Wake();
  if (loop_.joinable()) loop_.join();
  absl::MutexLock lock(&mu_);
  while (!conns_.empty()) Close(conns_.begin()->first, /*reset=*/true);
  for (int fd : dummy_fds_) AbortClose(fd);
  for (int fd : {listen_fd_, reserve_fd_, wake_fd_}) {
    if (fd >= 0) close(fd);
  }
}

absl::Status FaultProxy::Start(const std::string& upstream_host,
                               int upstream_port) {
  absl::MutexLock lock(&mu_);
  if (started_) {
    return absl::FailedPreconditionError("FaultProxy::Start() called twice");
  }
  if (wake_fd_ < 0) wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return Errno("eventfd");
  absl::Status s = SetUpstreamLocked(upstream_host, upstream_port);
  if (s.ok()) s = Listen(SOMAXCONN);
  if (!s.ok()) return s;
  port_ = LocalPort(listen_fd_);
  absl::StatusOr<int> reserve = BindLoopback(port_);
  if (!reserve.ok()) return reserve.status();
  reserve_fd_ = *reserve;
  started_ = true;
  loop_ = std::thread(&FaultProxy::Loop, this);
  return absl::OkStatus();
}

int FaultProxy::port() const {
  absl::MutexLock lock(&mu_);
  return port_;
}

absl::Status FaultProxy::SetUpstream(const std::string& host, int port) {
  absl::MutexLock lock(&mu_);
  return SetUpstreamLocked(host, port);
}

absl::Status FaultProxy::SetUpstreamLocked(const std::string& host, int port) {
  if (port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("upstream port ", port, " of ", host, " is not 1..65535"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot resolve upstream ", host, ":", port, ": ", gai_strerror(rc)));
  }
  // "localhost" may list ::1 first; test servers listen on 127.0.0.1.
  const addrinfo* pick = found;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  }
  std::memcpy(&upstream_.addr, pick->ai_addr, pick->ai_addrlen);
  upstream_.addr_len = pick->ai_addrlen;
  upstream_.name = absl::StrCat(host, ":", port);
  freeaddrinfo(found);
  return absl::OkStatus();
}

void FaultProxy::SetFault(Direction direction, Fault fault, Held held) {
  absl::MutexLock lock(&mu_);
  SetFaultLocked(direction, fault, held);
  Wake();
}

void FaultProxy::SetFaultLocked(Direction direction, Fault fault, Held held) {
  defaults_[Idx(direction)] = fault;
  for (auto& [id, conn] : conns_) {
    SetPipeFault(conn->pipes[Idx(direction)], direction, fault, held);
  }
}

absl::Status FaultProxy::SetConnectionFault(uint64_t id, Direction direction,
                                            Fault fault, Held held) {
  absl::MutexLock lock(&mu_);
  auto it = conns_.find(id);
  if (it == conns_.end()) {
    return absl::NotFoundError(absl::StrCat("no open proxy connection ", id));
  }
  SetPipeFault(it->second->pipes[Idx(direction)], direction, fault, held);
  Wake();
  return absl::OkStatus();
}

void FaultProxy::SetPipeFault(Pipe& pipe, Direction direction, Fault fault,
                              Held held) {
  const bool lifting = pipe.fault.kind == Fault::Kind::kStall &&
                       fault.kind != Fault::Kind::kStall;
  pipe.fault = fault;
  if (!lifting) return;
  // Held chunks are never partly written: nothing is written during a stall.
  const Clock::time_point due =
      Clock::now() + (fault.kind == Fault::Kind::kDelay
                          ? absl::ToChronoNanoseconds(fault.delay)
                          : Clock::duration::zero());
  for (auto it = pipe.queue.begin(); it != pipe.queue.end();) {
    if (!it->held) {
      ++it;
    } else if (held == Held::kDiscard || fault.kind == Fault::Kind::kDrop) {
      CountDropped(pipe, direction, it->data.size());
      pipe.buffered -= it->data.size();
      it = pipe.queue.erase(it);
    } else {
      it->held = false;
      it->due = due;
      ++it;
    }
  }
}

absl::Status FaultProxy::SetAdmission(Admission admission) {
  LockOutsidePoll();
  absl::Status s = ApplyAdmission(admission);
  mu_.Unlock();
  return s;
}

absl::Status FaultProxy::Partition() {
  LockOutsidePoll();
  for (Direction d : kBothDirections)
    SetFaultLocked(d, Fault::Stall(), Held::kDeliver);
  absl::Status s = ApplyAdmission(Admission::kBlackhole);
  mu_.Unlock();
  return s;
}

absl::Status FaultProxy::Heal(Held held) {
  LockOutsidePoll();
  for (Direction d : kBothDirections) SetFaultLocked(d, Fault::Pass(), held);
  absl::Status s = ApplyAdmission(Admission::kAccept);
  mu_.Unlock();
  return s;
}

absl::Status FaultProxy::ApplyAdmission(Admission next) {
  if (!started_) {
    return absl::FailedPreconditionError(
        "FaultProxy::SetAdmission() needs Start() first");
  }
  if (next == admission_) return absl::OkStatus();
  const Admission prev = admission_;
  // Handshakes completed so far were made under the previous setting.
  if (Accepting()) AcceptPending();
  admission_ = next;
  if (prev == Admission::kBlackhole) {
    // Clients that slipped in before the dummies filled the queue meet `next`;
    // the dummies are still open, so their ports identify them.
    absl::Status s = Listen(SOMAXCONN);
    if (!s.ok()) return s;
    AcceptPending();
    for (int fd : dummy_fds_) AbortClose(fd);
    dummy_fds_.clear();
    dummy_ports_.clear();
  }
  switch (next) {
    case Admission::kAccept:
    case Admission::kReset:
      return Listen(SOMAXCONN);
    case Admission::kRefuse:
      close(listen_fd_);  // resets connections still in the accept queue
      listen_fd_ = -1;
      return absl::OkStatus();
    case Admission::kBlackhole:
      return Blackhole();
  }
  return absl::OkStatus();
}

absl::Status FaultProxy::Listen(int backlog) {
  if (listen_fd_ < 0) {
    absl::StatusOr<int> fd = BindLoopback(port_);
    if (!fd.ok()) return fd.status();
    listen_fd_ = *fd;
  }
  // On a listening socket, listen() again only changes the backlog.
  if (listen(listen_fd_, backlog) != 0) return Errno("listen");
  return absl::OkStatus();
}

absl::Status FaultProxy::Blackhole() {
  absl::Status s = Listen(0);
  if (!s.ok()) return s;
  // With a backlog of 0 one established connection fills the accept queue;
  // the kernel then drops SYNs without answering. Nobody accepts, so our own
  // connections stay there until the blackhole is lifted.
  for (int i = 0; i < 4 && !AcceptQueueFull(listen_fd_); ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return Errno("socket");
    sockaddr_in addr = Loopback(port_);
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof(err);
    if ((connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 &&
         errno != EINPROGRESS) ||
        poll(&p, 1, 1000) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      close(fd);  // its SYN was dropped: the queue filled up meanwhile
      continue;
    }
    dummy_fds_.push_back(fd);
    dummy_ports_.insert(LocalPort(fd));
  }
  if (!AcceptQueueFull(listen_fd_)) {
    return absl::InternalError(
        absl::StrCat("could not fill the accept queue of 127.0.0.1:", port_,
                     ", so connect() to it may still succeed"));
  }
  return absl::OkStatus();
}

void FaultProxy::ResetAll() {
  LockOutsidePoll();
  while (!conns_.empty()) Close(conns_.begin()->first, /*reset=*/true);
  mu_.Unlock();
}

absl::Status FaultProxy::ResetConnection(uint64_t id) {
  LockOutsidePoll();
  const bool open = conns_.contains(id);
  if (open) Close(id, /*reset=*/true);
  mu_.Unlock();
  return open ? absl::OkStatus()
              : absl::NotFoundError(
                    absl::StrCat("no open proxy connection ", id));
}

std::vector<ConnectionInfo> FaultProxy::Connections() const {
  absl::MutexLock lock(&mu_);
  std::vector<ConnectionInfo> out;
  for (const auto& [id, conn] : conns_) {
    out.push_back({id, conn->upstream, !conn->connecting, conn->pipes[0].fault,
                   conn->pipes[1].fault, conn->pipes[0].stats,
                   conn->pipes[1].stats});
  }
  return out;
}

ProxyStats FaultProxy::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::Status FaultProxy::WaitFor(
    const std::function<bool(const ProxyStats&)>& done, absl::Duration timeout,
    absl::string_view what) const {
  absl::MutexLock lock(&mu_);
  // Await calls it with mu_ held.
  auto ready = [&]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done(stats_); };
  if (mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) {
    return absl::OkStatus();
  }
  const ProxyStats& s = stats_;
  std::string counts = absl::StrCat("accepted ", s.accepted, ", live ", s.live);
  for (Direction d : kBothDirections) {
    absl::StrAppend(&counts, "; ", Name(d), " received ", s[d].received,
                    ", forwarded ", s[d].forwarded, ", dropped ", s[d].dropped);
  }
  return absl::DeadlineExceededError(
      absl::StrCat(what, " did not happen within ",
                   absl::FormatDuration(timeout), " (proxy: ", counts, ")"));
}

absl::Status FaultProxy::WaitForReceived(Direction direction, uint64_t total,
                                         absl::Duration timeout) const {
  return WaitFor(
      [&](const ProxyStats& s) { return s[direction].received >= total; },
      timeout, absl::StrCat(total, " bytes of ", Name(direction), " received"));
}

absl::Status FaultProxy::WaitForForwarded(Direction direction, uint64_t total,
                                          absl::Duration timeout) const {
  return WaitFor(
      [&](const ProxyStats& s) { return s[direction].forwarded >= total; },
      timeout,
      absl::StrCat(total, " bytes of ", Name(direction), " forwarded"));
}

absl::Status FaultProxy::WaitForAccepted(uint64_t total,
                                         absl::Duration timeout) const {
  return WaitFor([&](const ProxyStats& s) { return s.accepted >= total; },
                 timeout, absl::StrCat(total, " connections accepted"));
}

}  // namespace dlock::test
