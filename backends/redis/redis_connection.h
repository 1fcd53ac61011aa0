// Copyright dlock authors. One synchronous hiredis connection, and a pool.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_CONNECTION_H_
#define DLOCK_BACKENDS_REDIS_REDIS_CONNECTION_H_

#include <hiredis/hiredis.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dlock::redis {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// Where and how to connect. `endpoint` is host:port, for messages.
struct ConnectionConfig {
  std::string host;
  int port = 6379;
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
  static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const ConnectionConfig& config);
  ~Connection();

  // One command. An error reply is returned as a reply (type
  // REDIS_REPLY_ERROR); a failure to talk to the server as Unavailable, after
  // which the connection is broken() and must be dropped.
  absl::StatusOr<Reply> Command(const std::vector<std::string>& argv);
  // Several commands in one write, replies in order.
  absl::StatusOr<std::vector<Reply>> Pipeline(
      const std::vector<std::vector<std::string>>& commands);

  bool broken() const { return broken_; }
  redisContext* context() { return ctx_; }

 private:
  Connection(redisContext* ctx, std::string endpoint)
      : ctx_(ctx), endpoint_(std::move(endpoint)) {}
  absl::Status IoError();

  redisContext* ctx_;
  const std::string endpoint_;
  bool broken_ = false;
};

// An error reply as a Status, or OK. `what` names the operation.
absl::Status ReplyError(const redisReply* reply, absl::string_view what,
                        absl::string_view endpoint);

// Connections shared by every thread of a client; opened on demand up to
// `max_size`, dropped when broken and reopened on the next use (C18).
class ConnectionPool {
 public:
  ConnectionPool(ConnectionConfig config, int max_size)
      : config_(std::move(config)), max_size_(max_size) {}

  class Handle {
   public:
    Handle(ConnectionPool* pool, std::unique_ptr<Connection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    Handle(Handle&&) = default;
    ~Handle() {
      if (conn_ != nullptr) pool_->Return(std::move(conn_));
    }
    Connection* operator->() { return conn_.get(); }
    Connection& operator*() { return *conn_; }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<Connection> conn_;
  };

  // A connection for one operation; waits at most the command timeout for
  // one to come free.
  absl::StatusOr<Handle> Get();
  const ConnectionConfig& config() const { return config_; }
  void CloseAll();

 private:
  void Return(std::unique_ptr<Connection> conn);

  const ConnectionConfig config_;
  const int max_size_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;  // idle plus handed out
};

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_CONNECTION_H_
