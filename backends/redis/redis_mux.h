// Copyright dlock authors. Commands of many threads over one connection.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_MUX_H_
#define DLOCK_BACKENDS_REDIS_REDIS_MUX_H_

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "redis_connection.h"

namespace dlock::redis {

// The RESP encoding of one command.
std::string FormatCommand(absl::Span<const std::string> argv);

// Pipelines the commands of every calling thread over one connection, with
// no thread of its own: a caller that finds nobody writing writes everything
// queued so far in one write(), and a caller that finds nobody reading reads
// and hands out replies (they come back in order) until its own is there.
// One thread alone pays one write and one read per command, as with a plain
// connection; many threads share writes and reads, and the server, reading
// many commands per read(), spends less per command.
class MuxConnection {
 public:
  explicit MuxConnection(std::unique_ptr<Connection> conn);

  // Sends the commands (RESP-encoded) back to back and returns their
  // replies in order. Unavailable, for every command, when the connection
  // fails; the connection is broken() from then on.
  absl::StatusOr<std::vector<Reply>> Call(std::vector<std::string> commands);

  // True once the connection failed, or once the server answered that it
  // cannot serve this client (MustReconnect(): READONLY, MASTERDOWN,
  // LOADING): new calls must go to a new connection. Commands already sent
  // still get their replies.
  bool broken() const;
  // True when broken() because of such an answer rather than a failure.
  bool wrong_server() const;

 private:
  // One Call: its caller sleeps on `wake` until every reply is in or the
  // connection failed, or until it is its turn to read. Every request of the
  // Call points here, so whoever finishes the Call or hands it the reading
  // wakes the one thread that waits for it, whichever request is in front.
  struct Waiter {
    size_t unanswered = 0;
    absl::CondVar wake;
  };
  struct Request {
    Reply reply;
    Waiter* waiter = nullptr;
  };

  absl::Status WriteAll(const std::string& bytes);
  absl::Status ReadSome(std::vector<Reply>& replies);
  // Fails every pending request and wakes their callers; shuts the socket
  // down so that a caller blocked reading it returns at once.
  void FailAll(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<Connection> conn_;
  mutable absl::Mutex mu_;
  std::string queued_ ABSL_GUARDED_BY(mu_);  // encoded, not yet written
  std::deque<Request*> pending_ ABSL_GUARDED_BY(mu_);  // oldest first
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  bool wrong_server_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_MUX_H_
