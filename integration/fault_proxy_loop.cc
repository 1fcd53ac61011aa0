// Copyright dlock authors. FaultProxy's event loop: one thread polls the
// listener and both sockets of every connection, reads what arrives, queues
// it under the fault of its direction and writes it when it is due.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "fault_proxy.h"

namespace dlock::test {
namespace {

// Small requests must not wait for Nagle: delays are the test's to choose.
void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

void FaultProxy::AbortClose(int fd) {
  if (fd < 0) return;
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  close(fd);
}

void FaultProxy::AcceptPending() {
  while (listen_fd_ >= 0) {
    sockaddr_in peer{};
    socklen_t len = sizeof(peer);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN: the queue is empty
    }
    if (dummy_ports_.erase(ntohs(peer.sin_port)) > 0) {
      AbortClose(fd);
      continue;
    }
    ++stats_.accepted;
    if (admission_ != Admission::kAccept) {
      AbortClose(fd);
      continue;
    }
    OpenUpstream(fd);
  }
}

void FaultProxy::OpenUpstream(int client_fd) {
  auto conn = std::make_unique<Conn>();
  conn->id = stats_.accepted;
  conn->client_fd = client_fd;
  conn->upstream = upstream_.name;
  conn->pipes[0].fault = defaults_[0];
  conn->pipes[1].fault = defaults_[1];
  conn->connect_deadline =
      Clock::now() +
      absl::ToChronoNanoseconds(options_.upstream_connect_timeout);
  SetNoDelay(client_fd);
  int fd = socket(upstream_.addr.ss_family,
                  SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    SetNoDelay(fd);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&upstream_.addr),
                upstream_.addr_len) == 0) {
      conn->connecting = false;
    } else if (errno != EINPROGRESS) {
      close(fd);
      fd = -1;
    }
  }
  if (fd < 0) {  // the upstream is unreachable: so is the proxy
    AbortClose(client_fd);
    return;
  }
  conn->server_fd = fd;
  conns_[conn->id] = std::move(conn);
  stats_.live = conns_.size();
}

void FaultProxy::Close(uint64_t id, bool reset) {
  auto it = conns_.find(id);
  Conn& conn = *it->second;
  for (Direction d : kBothDirections) {
    Pipe& pipe = conn.pipes[Idx(d)];
    CountDropped(pipe, d, pipe.buffered - pipe.written);
  }
  for (int fd : {conn.client_fd, conn.server_fd}) {
    if (reset) {
      AbortClose(fd);
    } else if (fd >= 0) {
      close(fd);
    }
  }
  conns_.erase(it);
  stats_.live = conns_.size();
}

DirectionStats& FaultProxy::Totals(Direction d) {
  return d == Direction::kRequests ? stats_.requests : stats_.replies;
}

void FaultProxy::CountDropped(Pipe& pipe, Direction direction, size_t n) {
  pipe.stats.dropped += n;
  Totals(direction).dropped += n;
}

void FaultProxy::LockOutsidePoll() {
  mu_.Lock();
  ++pausers_;  // keeps the loop from entering poll() again
  Wake();
  mu_.Await(absl::Condition(this, &FaultProxy::OutsidePoll));
  --pausers_;
}

void FaultProxy::Wake() {
  if (wake_fd_ >= 0) eventfd_write(wake_fd_, 1);
}

void FaultProxy::Read(Conn& conn, Direction direction) {
  Pipe& pipe = conn.pipes[Idx(direction)];
  const int fd =
      direction == Direction::kRequests ? conn.client_fd : conn.server_fd;
  char buf[64 * 1024];
  while (pipe.end == Pipe::End::kOpen &&
         pipe.buffered < options_.max_buffered_bytes) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      // The end travels behind the bytes read before it, faults included.
      pipe.end = n == 0 ? Pipe::End::kFin : Pipe::End::kRst;
      return;
    }
    pipe.stats.received += n;
    Totals(direction).received += n;
    const Fault& f = pipe.fault;
    if (f.kind == Fault::Kind::kDrop) {
      CountDropped(pipe, direction, n);
      continue;
    }
    if (f.kind == Fault::Kind::kTrickle && f.piece > 0) {
      // Each piece one `delay` after the one before, this read's after the
      // last read's.
      Clock::time_point due = std::max(Clock::now(), pipe.trickled_until);
      for (size_t at = 0; at < static_cast<size_t>(n); at += f.piece) {
        due += absl::ToChronoNanoseconds(f.delay);
        pipe.queue.push_back(
            Chunk{std::string(buf + at,
                              std::min(f.piece, static_cast<size_t>(n) - at)),
                  due, false});
      }
      pipe.trickled_until = due;
      pipe.buffered += n;
      continue;
    }
    Chunk chunk{std::string(buf, n), Clock::now(),
                f.kind == Fault::Kind::kStall};
    if (f.kind == Fault::Kind::kDelay) {
      chunk.due += absl::ToChronoNanoseconds(f.delay);
    }
    pipe.queue.push_back(std::move(chunk));
    pipe.buffered += n;
  }
}

bool FaultProxy::Pump(Conn& conn, Clock::time_point now) {
  if (conn.connecting) {
    if (now < conn.connect_deadline) return true;
    Close(conn.id, /*reset=*/true);
    return false;
  }
  for (Direction d : kBothDirections) {
    Pipe& pipe = conn.pipes[Idx(d)];
    if (pipe.fault.kind == Fault::Kind::kStall) continue;
    const int to = d == Direction::kRequests ? conn.server_fd : conn.client_fd;
    while (!pipe.queue.empty() && pipe.queue.front().due <= now) {
      const std::string& data = pipe.queue.front().data;
      ssize_t n = send(to, data.data() + pipe.written,
                       data.size() - pipe.written, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0) {  // the receiver is gone: so is the connection
        Close(conn.id, /*reset=*/true);
        return false;
      }
      pipe.written += n;
      pipe.stats.forwarded += n;
      Totals(d).forwarded += n;
      if (pipe.written < data.size()) break;  // its buffer is full
      pipe.buffered -= data.size();
      pipe.written = 0;
      pipe.queue.pop_front();
    }
    if (pipe.queue.empty() && pipe.end != Pipe::End::kOpen && !pipe.end_sent) {
      if (pipe.end == Pipe::End::kRst) {
        Close(conn.id, /*reset=*/true);
        return false;
      }
      shutdown(to, SHUT_WR);
      pipe.end_sent = true;
    }
  }
  if (conn.pipes[0].end_sent && conn.pipes[1].end_sent) {
    Close(conn.id, /*reset=*/false);
    return false;
  }
  return true;
}

void FaultProxy::Loop() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;  // of the connection at fds[2 + 2 * i]
  mu_.Lock();
  while (true) {
    mu_.Await(absl::Condition(this, &FaultProxy::Unpaused));
    if (stopping_) break;
    const Clock::time_point now = Clock::now();
    Clock::time_point wake_at = Clock::time_point::max();
    // True if `pipe` has bytes due that its receiver did not take.
    auto blocked = [&](const Pipe& pipe) {
      if (pipe.fault.kind == Fault::Kind::kStall || pipe.queue.empty()) {
        return false;
      }
      if (pipe.queue.front().due <= now) return true;
      wake_at = std::min(wake_at, pipe.queue.front().due);
      return false;
    };
    auto readable = [&](const Pipe& pipe) {
      return pipe.end == Pipe::End::kOpen &&
             pipe.buffered < options_.max_buffered_bytes;
    };
    fds.assign(
        {{wake_fd_, POLLIN, 0}, {Accepting() ? listen_fd_ : -1, POLLIN, 0}});
    ids.clear();
    for (auto it = conns_.begin(); it != conns_.end();) {
      Conn& conn = *(it++)->second;  // Pump() may erase it
      if (!Pump(conn, now)) continue;
      short client = (readable(conn.pipes[0]) ? POLLIN : 0) |
                     (blocked(conn.pipes[1]) ? POLLOUT : 0);
      short server = POLLOUT;
      if (conn.connecting) {
        wake_at = std::min(wake_at, conn.connect_deadline);
      } else {
        server = (readable(conn.pipes[1]) ? POLLIN : 0) |
                 (blocked(conn.pipes[0]) ? POLLOUT : 0);
      }
      // An fd with nothing to wait for is left out, lest a hang-up on it
      // wake poll() over and over.
      fds.push_back({client != 0 ? conn.client_fd : -1, client, 0});
      fds.push_back({server != 0 ? conn.server_fd : -1, server, 0});
      ids.push_back(conn.id);
    }
    int timeout_ms = -1;
    if (wake_at != Clock::time_point::max()) {
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(wake_at - now);
      timeout_ms = static_cast<int>(std::clamp<int64_t>(ms.count(), 0, 60000));
    }
    in_poll_ = true;
    mu_.Unlock();
    poll(fds.data(), fds.size(), timeout_ms);
    mu_.Lock();
    in_poll_ = false;
    // Control methods may have changed connections meanwhile (not closed
    // their sockets: see LockOutsidePoll()), so look them up again.
    eventfd_t count;
    if (fds[0].revents != 0) eventfd_read(wake_fd_, &count);
    if (fds[1].revents != 0 && Accepting()) AcceptPending();
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = conns_.find(ids[i]);
      if (it == conns_.end()) continue;
      Conn& conn = *it->second;
      const short client = fds[2 + 2 * i].revents;
      const short server = fds[3 + 2 * i].revents;
      if (conn.connecting && server != 0) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(conn.server_fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          Close(conn.id, /*reset=*/true);
          continue;
        }
        conn.connecting = false;
      }
      if (client != 0) Read(conn, Direction::kRequests);
      if (server != 0 && !conn.connecting) Read(conn, Direction::kReplies);
    }
  }
  mu_.Unlock();
}

}  // namespace dlock::test
