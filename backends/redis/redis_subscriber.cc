#include "redis_subscriber.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dlock::redis {

void WakeOnAnnouncement(WakeupHub& hub, absl::string_view message) {
  if (!message.empty() && message.back() == kOneWaiterMark) {
    message.remove_suffix(1);
    hub.Notify(message, WakeupHub::Waking::kOne);
  } else {
    hub.Notify(message);
  }
}

std::optional<absl::string_view> PublishedMessage(const redisReply* reply) {
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
      reply->element[0]->type != REDIS_REPLY_STRING ||
      absl::string_view(reply->element[0]->str, reply->element[0]->len) !=
          "message") {
    return std::nullopt;
  }
  const redisReply* payload = reply->element[2];
  return absl::string_view(payload->str, payload->len);
}

Subscriber::Subscriber(ConnectionConfig config, std::string channel,
                       Callbacks callbacks)
    : config_(std::move(config)),
      channel_(std::move(channel)),
      callbacks_(std::move(callbacks)) {
  stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

Subscriber::~Subscriber() {
  Stop();
  if (stop_fd_ >= 0) close(stop_fd_);
}

absl::Status Subscriber::Start() {
  absl::Status s = Subscribe();
  if (!s.ok()) return s;
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void Subscriber::StartTrying() {
  (void)Subscribe();
  thread_ = std::thread([this] { Run(); });
}

void Subscriber::Stop() {
  if (stopping_.exchange(true)) return;
  uint64_t one = 1;
  if (stop_fd_ >= 0) (void)!write(stop_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  conn_.reset();
}

void Subscriber::Resubscribe() {
  // The flag before the wake-up: the thread that sees the wake-up sees it.
  resubscribe_.store(true);
  uint64_t one = 1;
  if (stop_fd_ >= 0) (void)!write(stop_fd_, &one, sizeof(one));
}

bool Subscriber::Woken() {
  uint64_t count = 0;
  if (stop_fd_ >= 0) (void)!read(stop_fd_, &count, sizeof(count));
  // Stop() sets the flag before it writes, so a consumed stop is not lost.
  return stopping_.load();
}

absl::Status Subscriber::Subscribe() {
  conn_.reset();
  // Stop() interrupts the dial: against an address that swallows SYNs it
  // would otherwise hold Close() for a whole connect_timeout.
  absl::StatusOr<std::unique_ptr<Connection>> conn =
      Connection::Open(config_, stop_fd_);
  if (!conn.ok()) return conn.status();
  absl::StatusOr<Reply> reply = (*conn)->Command({"SUBSCRIBE", channel_});
  if (!reply.ok()) return reply.status();
  // LOADING, MASTERDOWN: Unavailable, and tried again with backoff.
  if (absl::Status s = ReplyError(reply->get(), "SUBSCRIBE", config_.endpoint);
      !s.ok()) {
    return s;
  }
  if ((*reply)->type != REDIS_REPLY_ARRAY) {
    return absl::InternalError(absl::StrCat("redis at ", config_.endpoint,
                                            " did not confirm SUBSCRIBE"));
  }
  conn_ = *std::move(conn);
  return absl::OkStatus();
}

void Subscriber::Run() {
  absl::Duration backoff = absl::Milliseconds(50);
  while (true) {
    if (conn_ != nullptr) {
      if (!Listen()) return;
      // Announcements made while we were away are lost: wake every waiter
      // now and again once resubscribed, so nobody sleeps a full poll.
      callbacks_.on_gap();
      conn_.reset();
    }
    // A requested resubscription goes at once; after a failure, back off.
    if (!resubscribe_.load()) {
      pollfd stop{stop_fd_, POLLIN, 0};
      (void)poll(&stop, 1,
                 static_cast<int>(absl::ToInt64Milliseconds(backoff)));
    }
    if (Woken()) return;
    // Cleared before dialing: a request that comes during the dial may have
    // been made after the address moved, so it dials once more.
    resubscribe_.store(false);
    if (Subscribe().ok()) {
      callbacks_.on_gap();
      backoff = absl::Milliseconds(50);
    } else {
      backoff = std::min(backoff * 2, absl::Seconds(1));
    }
  }
}

bool Subscriber::Listen() {
  while (true) {
    std::vector<Reply> replies;
    if (!conn_->ReadReplies(replies, kNoDeadline, stop_fd_).ok()) return true;
    if (replies.empty()) {  // stop_fd_ turned readable
      if (Woken()) return false;
      if (resubscribe_.load()) return true;
      continue;
    }
    for (const Reply& reply : replies) {
      if (std::optional<absl::string_view> message =
              PublishedMessage(reply.get())) {
        callbacks_.on_message(*message);
      }
    }
  }
}

}  // namespace dlock::redis
