// Copyright dlock authors. One connection to a Redis server: RESP over a
// plain or TLS stream, hiredis parsing the replies.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_CONNECTION_H_
#define DLOCK_BACKENDS_REDIS_REDIS_CONNECTION_H_

#include <hiredis/hiredis.h>

#include <atomic>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "redis_transport.h"

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
  // TLS (rediss://, rediss-sentinel://, redlocks://); none: plain TCP.
  TlsSettings tls;
};

// The RESP encoding of one command.
std::string FormatCommand(absl::Span<const std::string> argv);
// The same appended to `out` piece by piece, with no argument copied
// first: the array's header for `args` arguments, then each argument.
void AppendArrayHeader(std::string& out, size_t args);
void AppendBulk(std::string& out, absl::string_view arg);

// One connection to a server, over a Stream (redis_transport.h), with
// hiredis's reader turning what arrives into replies. Open() sets it up;
// Command() is one synchronous round trip; Write() and ReadReplies() are the
// halves the multiplexer (redis_mux.h) and the subscriber use: one thread may
// write while another reads.
class Connection {
 public:
  // Connects (plain or TLS, as config.tls says), authenticates and selects
  // the db. Unavailable when the server cannot be reached, Unauthenticated
  // when it rejects the credentials or a certificate. When `cancel_fd` is not
  // -1, the dial gives up (Cancelled) as soon as that descriptor turns
  // readable, instead of waiting out connect_timeout: a thread that is being
  // stopped stops at once.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const ConnectionConfig& config, int cancel_fd = -1);
  // A connection over a stream, not set up yet: for tests and the fuzzer
  // that play the server themselves.
  Connection(std::unique_ptr<Stream> stream, absl::Duration command_timeout);
  // What Open() does once connected: AUTH (config.user, config.password),
  // SELECT (config.db) and, with config.must_be_master, ROLE. Its messages
  // never show the password, even one the server repeats.
  absl::Status SetUp(const ConnectionConfig& config);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // One command. An error reply is returned as a reply (type
  // REDIS_REPLY_ERROR); a failure to talk to the server as Unavailable, after
  // which the connection is broken() and must be dropped.
  absl::StatusOr<Reply> Command(const std::vector<std::string>& argv);

  // Sends RESP-encoded commands by `deadline`. Unavailable (and broken())
  // when the connection fails or the deadline passes.
  absl::Status Write(absl::string_view bytes, Deadline deadline);
  // Appends to `replies` every reply that has arrived, at least one (at most
  // `max`), reading until `deadline`; appends none, and returns OK, once
  // `wake_fd` (-1: none) turns readable. Unavailable when the connection
  // fails or no reply comes by the deadline, Internal for bytes that are no
  // reply; broken() from then on.
  absl::Status ReadReplies(std::vector<Reply>& replies, Deadline deadline,
                           int wake_fd = -1,
                           size_t max = std::numeric_limits<size_t>::max());
  // Ends every Write() and ReadReplies() in progress, and every one to
  // come: for a thread that fails the connection while another waits on it.
  // Any thread.
  void Shutdown() { stream_->Shutdown(); }

  bool broken() const { return broken_.load(); }
  const std::string& endpoint() const { return stream_->endpoint(); }
  // How long a command may wait for its reply (ConnectionConfig).
  absl::Duration command_timeout() const { return command_timeout_; }

 private:
  // SetUp() but for the password in its messages.
  absl::Status SetUpSteps(const ConnectionConfig& config);
  // Moves the replies the reader has whole into `replies`, up to `max`.
  absl::Status TakeParsed(std::vector<Reply>& replies, size_t max);
  // Marks the connection broken and returns `status`.
  absl::Status Broken(absl::Status status);
  // What a failed read means for the caller, in its words.
  absl::Status ReadFailure(const absl::Status& status);
  // `status`, with a hint when a plaintext connection fails before its first
  // reply: that is what a port that takes only TLS does to it.
  absl::Status WithPlaintextHint(absl::Status status) const;

  const std::unique_ptr<Stream> stream_;
  const absl::Duration command_timeout_;
  redisReader* const reader_;         // used by the reading thread only
  std::atomic<bool> replied_{false};  // a reply has come
  std::atomic<bool> broken_{false};
};

// A Redis Cluster's answer that the slot of a command's key is served by
// another node: MOVED (for good: the client's slot map is out of date) or
// ASK (this once, while the slot migrates: ASKING, then the command, at the
// target). An empty host means the node that answered.
struct Redirect {
  bool ask = false;
  int slot = 0;
  Address to;
};
std::optional<Redirect> RedirectOf(const redisReply* reply);
// The redirect a ReplyError() status was made of, if any.
std::optional<Redirect> RedirectIn(const absl::Status& status);

// An error reply as a Status, or OK. `what` names the operation.
// Unauthenticated for NOAUTH and WRONGPASS; PermissionDenied for a refusal
// by the ACL (IsAclRefusal()); Unavailable for a server that cannot serve
// now (BUSY, and the MustReconnect() replies); Internal for the rest.
absl::Status ReplyError(const redisReply* reply, absl::string_view what,
                        absl::string_view endpoint);

// True for a refusal by the ACL of the connection's user: NOPERM (a command,
// a key or a channel it may not use), and its form inside a script.
bool IsAclRefusal(const redisReply* reply);

// True for the error replies of a server that cannot take this client's
// writes and will not on this connection: READONLY (a replica, such as a
// master demoted by a failover), MASTERDOWN (a replica that lost its
// master), LOADING (a server still reading its data set). The connection must
// be dropped, so that the next command connects again, possibly to the new
// master behind the same address (DNS, a proxy, a virtual IP).
bool MustReconnect(const redisReply* reply);

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_CONNECTION_H_
