// Copyright dlock authors. Commands of many threads over one connection.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_MUX_H_
#define DLOCK_BACKENDS_REDIS_REDIS_MUX_H_

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "redis_connection.h"

namespace dlock::redis {

// Pipelines the commands of every calling thread over one connection, with
// no thread of its own: a caller that finds nobody writing writes everything
// queued so far in one write(), and a caller that finds nobody reading reads
// and hands out replies (they come back in order) until its own is there.
// One thread alone pays one write and one read per command, as with a plain
// connection; many threads share writes and reads, and the server, reading
// many commands per read(), spends less per command.
class MuxConnection {
 private:
  // One Call: its caller sleeps on `wake` until every reply is in or the
  // connection failed, or until it is its turn to read. Every request of the
  // Call points here, so whoever finishes the Call or hands it the reading
  // wakes the one thread that waits for it, whichever request is in front.
  struct Waiter {
    size_t unanswered = 0;
    // Whether its caller sleeps on `wake` now. A submitted Call's caller may
    // be away (awaiting another server): the reading is handed to a caller
    // that sleeps here, never to one that cannot take it.
    bool asleep = false;
    absl::CondVar wake;
  };
  struct Request {
    Reply reply;
    Waiter* waiter = nullptr;
  };

 public:
  // Commands submitted and not yet awaited. Every Ticket is awaited: its
  // destructor awaits (and drops the replies) when its owner did not.
  class Ticket {
   public:
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

   private:
    friend class MuxConnection;
    Ticket() = default;
    MuxConnection* mux_ = nullptr;
    Waiter waiter_;  // the Ticket stays put (on the heap, or Call's stack)
    // A lock call's one or two commands need no allocation of their own.
    absl::InlinedVector<Request, 2> requests_;
    // Submit() + command_timeout: a reply not in by then fails the
    // connection, however long the caller spent awaiting other servers.
    Deadline deadline_;
    bool awaited_ = false;
  };

  explicit MuxConnection(std::unique_ptr<Connection> conn);

  // Sends the commands (RESP-encoded) back to back and returns their
  // replies in order. Unavailable, for every command, when the connection
  // fails; the connection is broken() from then on.
  absl::StatusOr<std::vector<Reply>> Call(std::vector<std::string> commands);

  // Call() in two halves, for a caller that talks to several servers at
  // once (a Redlock attempt): Submit() queues the commands and writes them
  // unless another caller is writing; Await() waits for their replies. A
  // caller that submits to every server before it awaits any waits for the
  // slowest server, not for their sum. The connection must outlive the
  // Ticket.
  std::unique_ptr<Ticket> Submit(std::vector<std::string> commands);
  // The same for `count` commands encoded back to back in `encoded`: the
  // bytes are queued as they are, not copied command by command.
  std::unique_ptr<Ticket> Submit(std::string encoded, size_t count);
  absl::StatusOr<std::vector<Reply>> Await(Ticket& ticket);

  // True once the connection failed, or once the server answered that it
  // cannot serve this client (MustReconnect(): READONLY, MASTERDOWN,
  // LOADING): new calls must go to a new connection. Commands already sent
  // still get their replies.
  bool broken() const;
  // True when broken() because of such an answer rather than a failure.
  bool wrong_server() const;
  // Takes no new commands from now on, as after such an answer: the master
  // moved (a Sentinel announced it). Commands sent still get their replies.
  void Retire();

 private:
  // Writes what is queued unless another caller writes (and will loop back
  // to write what was queued meanwhile).
  void WriteQueued() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Submit() into a Ticket the caller placed.
  void SubmitInto(Ticket& ticket, std::string encoded, size_t count);
  absl::Status WriteAll(const std::string& bytes);
  // Reads at least one reply; Unavailable when none arrives by `deadline`.
  absl::Status ReadSome(std::vector<Reply>& replies, Deadline deadline);
  // Fails every pending request and wakes their callers; shuts the socket
  // down so that a caller blocked reading it returns at once.
  void FailAll(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes the caller of the oldest pending request that sleeps, to read.
  void HandOverReading() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

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
