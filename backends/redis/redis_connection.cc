#include "redis_connection.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dlock::redis {
namespace {

// The error code of an error reply: its first word ("READONLY" of
// "READONLY You can't write against a read only replica.").
absl::string_view ErrorCode(const redisReply* reply) {
  absl::string_view text(reply->str, reply->len);
  return text.substr(0, text.find(' '));
}

}  // namespace

absl::Status ReplyError(const redisReply* reply, absl::string_view what,
                        absl::string_view endpoint) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ERROR) {
    return absl::OkStatus();
  }
  absl::string_view text(reply->str, reply->len);
  const absl::string_view code = ErrorCode(reply);
  if (code == "NOAUTH" || code == "WRONGPASS") {
    return absl::UnauthenticatedError(
        absl::StrCat("redis at ", endpoint, " refused ", what, ": ", text));
  }
  if (MustReconnect(reply)) {
    return absl::UnavailableError(absl::StrCat("redis at ", endpoint,
                                               " cannot serve ", what,
                                               " (reconnecting): ", text));
  }
  // A script still running; a cluster slot moving or without a master: the
  // server cannot serve now, and may shortly (a waiting acquire rides it
  // out, docs/semantics.md).
  if (code == "BUSY" || code == "TRYAGAIN" || code == "CLUSTERDOWN") {
    return absl::UnavailableError(absl::StrCat(
        "redis at ", endpoint, " cannot serve ", what, ": ", text));
  }
  return absl::InternalError(
      absl::StrCat("redis at ", endpoint, " failed ", what, ": ", text));
}

bool MustReconnect(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ERROR) return false;
  const absl::string_view code = ErrorCode(reply);
  return code == "READONLY" || code == "MASTERDOWN" || code == "LOADING";
}

namespace {

// A connected, blocking TCP socket to host:port, or Unavailable. Dials every
// address the name resolves to in turn, within connect_timeout in all (on
// the monotonic clock, as the kernel counts it), and gives up with Cancelled
// when `cancel_fd` turns readable. The socket is close-on-exec from the
// start (hiredis 0.14 does not set it at all, and setting it afterwards
// leaves a window in which a fork() and exec() on another thread would hand
// the connection to the new program).
absl::StatusOr<int> Dial(const ConnectionConfig& config, int cancel_fd) {
  const auto deadline = std::chrono::steady_clock::now() +
                        absl::ToChronoNanoseconds(config.connect_timeout);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  const std::string port = absl::StrCat(config.port);
  if (const int rc =
          getaddrinfo(config.host.c_str(), port.c_str(), &hints, &addresses);
      rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect to redis at ",
                                               config.endpoint, ": ",
                                               gai_strerror(rc)));
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
    int error = 0;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) error = errno;
    while (error == EINPROGRESS || error == EINTR) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        error = ETIMEDOUT;
        break;
      }
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
      pollfd fds[2] = {{fd, POLLOUT, 0}, {cancel_fd, POLLIN, 0}};
      const int n = poll(fds, cancel_fd >= 0 ? 2 : 1,
                         static_cast<int>(std::min<int64_t>(
                             left.count(), std::numeric_limits<int>::max())));
      if (n < 0 && errno == EINTR) continue;
      if (cancel_fd >= 0 && fds[1].revents != 0) {
        close(fd);
        freeaddrinfo(addresses);
        return absl::CancelledError(
            absl::StrCat("stopped connecting to redis at ", config.endpoint));
      }
      if (n == 0) continue;  // the deadline is checked above
      socklen_t len = sizeof(error);
      if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) {
        error = errno;
      }
    }
    if (error != 0) {
      why = std::strerror(error);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(addresses);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect to redis at ",
                                               config.endpoint, ": ", why));
  }
  // hiredis reads and writes in blocking mode (bounded by SO_RCVTIMEO and
  // SO_SNDTIMEO, set below), and sends each command at once, as hiredis's
  // own connect sets up.
  const int one = 1;
  if (const int flags = fcntl(fd, F_GETFL);
      flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    const int error = errno;
    close(fd);
    return absl::InternalError(
        absl::StrCat("cannot set up the connection to redis at ",
                     config.endpoint, ": ", std::strerror(error)));
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(
    const ConnectionConfig& given, int cancel_fd) {
  ConnectionConfig config = given;
  if (given.locate) {
    absl::StatusOr<Address> address = given.locate(cancel_fd);
    if (!address.ok()) return address.status();
    config.host = address->host;
    config.port = address->port;
    config.endpoint = absl::StrCat(given.endpoint, " (now at ", address->host,
                                   ":", address->port, ")");
  }
  absl::StatusOr<std::unique_ptr<Connection>> conn = OpenAt(config, cancel_fd);
  if (!conn.ok() || !given.must_be_master) return conn;
  // A Sentinel may name the old master for a moment during a failover.
  absl::StatusOr<Reply> role = (*conn)->Command({"ROLE"});
  if (!role.ok()) return role.status();
  const redisReply* r = role->get();
  if (absl::Status s = ReplyError(r, "ROLE", config.endpoint); !s.ok()) {
    return s;
  }
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
      r->element[0]->type != REDIS_REPLY_STRING ||
      absl::string_view(r->element[0]->str, r->element[0]->len) != "master") {
    return absl::UnavailableError(
        absl::StrCat("redis at ", config.endpoint,
                     " is not a master (yet): the Sentinels are switching"));
  }
  return conn;
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::OpenAt(
    const ConnectionConfig& config, int cancel_fd) {
  absl::StatusOr<int> fd = Dial(config, cancel_fd);
  if (!fd.ok()) return fd.status();
  redisContext* ctx = redisConnectFd(*fd);
  if (ctx == nullptr || ctx->err != 0) {
    if (ctx != nullptr) {
      redisFree(ctx);  // closes the socket
    } else {
      close(*fd);
    }
    return absl::UnavailableError(absl::StrCat(
        "cannot connect to redis at ", config.endpoint, ": out of memory"));
  }
  std::unique_ptr<Connection> conn(
      new Connection(ctx, config.endpoint, config.command_timeout));
  // Without the timeout a read from a server that went silent would block
  // for good.
  if (redisSetTimeout(ctx, absl::ToTimeval(config.command_timeout)) !=
          REDIS_OK ||
      redisEnableKeepAlive(ctx) != REDIS_OK) {
    return absl::InternalError(
        absl::StrCat("cannot set up the connection to redis at ",
                     config.endpoint, ": ", ctx->errstr));
  }
  if (!config.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!config.user.empty()) auth.push_back(config.user);
    auth.push_back(config.password);
    absl::StatusOr<Reply> reply = conn->Command(auth);
    if (!reply.ok()) return reply.status();
    if ((*reply)->type == REDIS_REPLY_ERROR) {
      return absl::UnauthenticatedError(absl::StrCat(
          "redis at ", config.endpoint, " rejected the credentials",
          config.user.empty() ? ""
                              : absl::StrCat(" of user '", config.user, "'"),
          ": ", absl::string_view((*reply)->str, (*reply)->len)));
    }
  }
  if (config.db != 0) {
    absl::StatusOr<Reply> reply =
        conn->Command({"SELECT", absl::StrCat(config.db)});
    if (!reply.ok()) return reply.status();
    if (absl::Status s = ReplyError(reply->get(), "SELECT", config.endpoint);
        !s.ok()) {
      return s;
    }
  }
  return conn;
}

Connection::~Connection() { redisFree(ctx_); }

absl::Status Connection::IoError() {
  broken_ = true;
  return absl::UnavailableError(
      absl::StrCat("lost the connection to redis at ", endpoint_, ": ",
                   ctx_->errstr[0] != '\0' ? ctx_->errstr : "no reply"));
}

absl::StatusOr<Reply> Connection::Command(
    const std::vector<std::string>& argv) {
  if (broken_) return IoError();
  std::vector<const char*> args;
  std::vector<size_t> lens;
  args.reserve(argv.size());
  lens.reserve(argv.size());
  for (const std::string& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  void* reply = redisCommandArgv(ctx_, static_cast<int>(args.size()),
                                 args.data(), lens.data());
  if (reply == nullptr) return IoError();
  return Reply(static_cast<redisReply*>(reply));
}

}  // namespace dlock::redis
