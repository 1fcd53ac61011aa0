// Copyright dlock authors. One synchronous hiredis connection, and a pool.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_CONNECTION_H_
#define DLOCK_BACKENDS_REDIS_REDIS_CONNECTION_H_

#include <hiredis/hiredis.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dlock::redis {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// A server's address.
struct Address {
  std::string host;
  int port = 0;
};

// Where and how to connect. `endpoint` is host:port, for messages.
struct ConnectionConfig {
  std::string host;
  int port = 6379;
  // When set, asked for the address at every dial instead of host and port
  // (Sentinel: the master named now). Gets the dial's cancel_fd (-1: none).
  std::function<absl::StatusOr<Address>(int cancel_fd)> locate;
  // The server must answer ROLE as a master, or the dial fails (Unavailable).
  bool must_be_master = false;
  std::string user;
  std::string password;  // never put in a message
  int db = 0;
  absl::Duration connect_timeout = absl::Seconds(2);
  absl::Duration command_timeout = absl::Seconds(2);
  std::string endpoint;
};

class Connection {
 public:
  // Connects, authenticates and selects the db. Unavailable when the server
  // cannot be reached, Unauthenticated when it rejects the credentials.
  // When `cancel_fd` is not -1, the connect() gives up (Cancelled) as soon
  // as that descriptor turns readable, instead of waiting out
  // connect_timeout: a thread that is being stopped stops at once.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const ConnectionConfig& config, int cancel_fd = -1);
  ~Connection();

  // One command. An error reply is returned as a reply (type
  // REDIS_REPLY_ERROR); a failure to talk to the server as Unavailable, after
  // which the connection is broken() and must be dropped.
  absl::StatusOr<Reply> Command(const std::vector<std::string>& argv);
  bool broken() const { return broken_; }
  redisContext* context() { return ctx_; }
  const std::string& endpoint() const { return endpoint_; }
  // How long a command may wait for its reply (ConnectionConfig).
  absl::Duration command_timeout() const { return command_timeout_; }

 private:
  // Open() at config.host and config.port.
  static absl::StatusOr<std::unique_ptr<Connection>> OpenAt(
      const ConnectionConfig& config, int cancel_fd);
  Connection(redisContext* ctx, std::string endpoint,
             absl::Duration command_timeout)
      : ctx_(ctx),
        endpoint_(std::move(endpoint)),
        command_timeout_(command_timeout) {}
  absl::Status IoError();

  redisContext* ctx_;
  const std::string endpoint_;
  const absl::Duration command_timeout_;
  bool broken_ = false;
};

// An error reply as a Status, or OK. `what` names the operation.
// Unauthenticated for NOAUTH and WRONGPASS; PermissionDenied for NOPERM (an
// ACL user without the right to a command or key); Unavailable for a server
// that cannot serve now (BUSY, and the MustReconnect() replies); Internal for
// the rest.
absl::Status ReplyError(const redisReply* reply, absl::string_view what,
                        absl::string_view endpoint);

// True for the error replies of a server that cannot take this client's
// writes and will not on this connection: READONLY (a replica, such as a
// master demoted by a failover), MASTERDOWN (a replica that lost its
// master), LOADING (a server still reading its data set). The connection must
// be dropped, so that the next command connects again, possibly to the new
// master behind the same address (DNS, a proxy, a virtual IP).
bool MustReconnect(const redisReply* reply);

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_CONNECTION_H_
