#include "redis_mux.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dlock::redis {

MuxConnection::MuxConnection(std::unique_ptr<Connection> conn)
    : conn_(std::move(conn)) {}

bool MuxConnection::broken() const {
  absl::MutexLock lock(&mu_);
  return !broken_.ok() || wrong_server_;
}

bool MuxConnection::wrong_server() const {
  absl::MutexLock lock(&mu_);
  return wrong_server_;
}

void MuxConnection::Retire() {
  absl::MutexLock lock(&mu_);
  wrong_server_ = true;
}

MuxConnection::Ticket::~Ticket() {
  if (!awaited_ && mux_ != nullptr) (void)mux_->Await(*this);
}

absl::StatusOr<std::vector<Reply>> MuxConnection::Call(
    std::vector<std::string> commands) {
  // On the stack: a lone round trip pays no allocation for its Ticket.
  Ticket ticket;
  SubmitInto(ticket, absl::StrJoin(commands, ""), commands.size());
  return Await(ticket);
}

std::unique_ptr<MuxConnection::Ticket> MuxConnection::Submit(
    std::vector<std::string> commands) {
  return Submit(absl::StrJoin(commands, ""), commands.size());
}

std::unique_ptr<MuxConnection::Ticket> MuxConnection::Submit(
    std::string encoded, size_t count) {
  std::unique_ptr<Ticket> ticket(new Ticket);
  SubmitInto(*ticket, std::move(encoded), count);
  return ticket;
}

void MuxConnection::SubmitInto(Ticket& ticket, std::string encoded,
                               size_t count) {
  ticket.mux_ = this;
  ticket.requests_.resize(count);
  ticket.deadline_ = DeadlineIn(conn_->command_timeout());
  absl::MutexLock lock(&mu_);
  // On a broken connection nothing is queued: Await() returns the failure.
  if (!broken_.ok()) return;
  // Nothing queued (no other caller's bytes wait for the writer): ours
  // become the queue, uncopied.
  if (queued_.empty()) {
    queued_ = std::move(encoded);
  } else {
    queued_.append(encoded);
  }
  for (Request& request : ticket.requests_) {
    request.waiter = &ticket.waiter_;
    pending_.push_back(&request);
  }
  ticket.waiter_.unanswered = count;
  WriteQueued();
}

void MuxConnection::WriteQueued() {
  // Whoever appends to queued_ either writes it here or finds a writer that
  // loops back here before it leaves, so no command waits for a writer that
  // is not coming.
  while (!writing_ && !queued_.empty() && broken_.ok()) {
    writing_ = true;
    std::string batch;
    batch.swap(queued_);
    mu_.Unlock();
    absl::Status written = WriteAll(batch);
    mu_.Lock();
    writing_ = false;
    if (!written.ok()) FailAll(written);
  }
}

absl::StatusOr<std::vector<Reply>> MuxConnection::Await(Ticket& ticket) {
  Waiter& waiter = ticket.waiter_;
  absl::MutexLock lock(&mu_);
  ticket.awaited_ = true;
  while (true) {
    // Write first, even when our replies are in: a caller leaves no queued
    // command behind with nobody to write it.
    if (!writing_ && !queued_.empty() && broken_.ok()) {
      WriteQueued();
      continue;
    }
    if (waiter.unanswered == 0) break;
    if (!reading_) {
      reading_ = true;
      std::vector<Reply> replies;
      mu_.Unlock();
      absl::Status read = ReadSome(replies, ticket.deadline_);
      mu_.Lock();
      reading_ = false;
      if (!read.ok()) {
        FailAll(read);
        continue;
      }
      // Replies read after the connection failed belong to requests that
      // were already failed: drop them.
      if (!broken_.ok()) continue;
      for (Reply& reply : replies) {
        if (pending_.empty()) {
          FailAll(absl::InternalError(
              absl::StrCat("redis at ", conn_->endpoint(),
                           " sent a reply nobody asked for")));
          break;
        }
        // Seen here, so that every caller's reply counts, whatever it
        // makes of it: a server that stopped taking our writes (demoted
        // after a failover, say) gets no new commands on this connection.
        if (MustReconnect(reply.get())) wrong_server_ = true;
        Request* r = pending_.front();
        pending_.pop_front();
        r->reply = std::move(reply);
        // Our own Call is counted too; we look at it when we loop.
        if (--r->waiter->unanswered == 0 && r->waiter != &waiter) {
          r->waiter->wake.Signal();
        }
      }
      continue;
    }
    // Someone else reads (and wakes us when our replies are in, or when we
    // are next to read) or writes (and loops back to the checks above).
    waiter.asleep = true;
    waiter.wake.Wait(&mu_);
    waiter.asleep = false;
  }
  // Hand the reading over: replies of the callers still waiting come only
  // if somebody reads.
  if (!reading_ && !pending_.empty()) HandOverReading();
  std::vector<Reply> replies;
  replies.reserve(ticket.requests_.size());
  for (Request& r : ticket.requests_) {
    if (r.reply == nullptr) return broken_;
    replies.push_back(std::move(r.reply));
  }
  return replies;
}

void MuxConnection::HandOverReading() {
  // Callers that are away (awaiting another server) look for themselves
  // when they come back; one that sleeps here would wait for good.
  for (Request* r : pending_) {
    if (r->waiter->asleep) {
      r->waiter->wake.Signal();
      return;
    }
  }
}

void MuxConnection::FailAll(const absl::Status& status) {
  if (broken_.ok()) {
    broken_ = status;
    // A caller blocked in read() or write() on this socket would otherwise
    // sit there until command_timeout, holding up nobody but itself, since
    // every pending caller is failed below; this ends its wait at once.
    conn_->Shutdown();
  }
  queued_.clear();
  for (Request* r : pending_) {
    // Each Call's Waiter once, when its last pending request goes.
    if (r->waiter->unanswered > 0 && --r->waiter->unanswered == 0) {
      r->waiter->wake.Signal();
    }
  }
  pending_.clear();
}

absl::Status MuxConnection::WriteAll(const std::string& bytes) {
  return conn_->Write(bytes, DeadlineIn(conn_->command_timeout()));
}

absl::Status MuxConnection::ReadSome(std::vector<Reply>& replies,
                                     Deadline deadline) {
  // The deadline counts from the Submit(), so a caller that awaited other
  // servers first (a Redlock round) waits one command_timeout in all, not
  // one per server.
  return conn_->ReadReplies(replies, deadline);
}

}  // namespace dlock::redis
