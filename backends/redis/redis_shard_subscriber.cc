#include "redis_shard_subscriber.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/errors.h"

namespace dlock::redis {
namespace {

// The kind of a push on a subscribed connection (["smessage", channel,
// message], ["ssubscribe", channel, count], ...), or "" for another reply.
absl::string_view PushKind(const redisReply* r) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
      r->element[0]->type != REDIS_REPLY_STRING ||
      r->element[1]->type != REDIS_REPLY_STRING) {
    return "";
  }
  return absl::string_view(r->element[0]->str, r->element[0]->len);
}

std::string Element(const redisReply* r, size_t i) {
  return std::string(r->element[i]->str, r->element[i]->len);
}

}  // namespace

ShardSubscriber::ShardSubscriber(ConnectionConfig config, Callbacks callbacks)
    : config_(std::move(config)), callbacks_(std::move(callbacks)) {
  stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

ShardSubscriber::~ShardSubscriber() {
  Stop();
  if (stop_fd_ >= 0) close(stop_fd_);
}

void ShardSubscriber::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    // Never consumed: every later read and dial ends at once.
    uint64_t one = 1;
    if (stop_fd_ >= 0) (void)!write(stop_fd_, &one, sizeof(one));
    answered_.SignalAll();
  }
  absl::MutexLock dial(&dial_mu_);
  if (listener_.joinable()) listener_.join();
  absl::MutexLock lock(&mu_);
  conn_.reset();
}

absl::Status ShardSubscriber::Connect() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return ClientClosedError(config_.endpoint);
    if (conn_ != nullptr) return absl::OkStatus();
  }
  // The listener of the connection that failed has ended, or is ending.
  if (listener_.joinable()) listener_.join();
  absl::StatusOr<std::unique_ptr<Connection>> opened =
      Connection::Open(config_, stop_fd_);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<Connection> conn = *std::move(opened);
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return ClientClosedError(config_.endpoint);
    conn_ = conn;
    subscribed_.clear();
    asked_.clear();
    refused_.clear();
  }
  listener_ = std::thread([this, conn] { Listen(conn); });
  return absl::OkStatus();
}

absl::StatusOr<bool> ShardSubscriber::Watch(const std::string& channel) {
  {
    absl::MutexLock lock(&mu_);
    if (subscribed_.contains(channel)) return false;
  }
  absl::MutexLock dial(&dial_mu_);
  if (absl::Status s = Connect(); !s.ok()) return s;
  std::shared_ptr<Connection> conn;
  {
    absl::MutexLock lock(&mu_);
    if (subscribed_.contains(channel)) return false;
    conn = conn_;
    if (conn == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("lost the subscription to redis at ", config_.endpoint));
    }
    asked_.push_back(channel);
  }
  const Deadline deadline = DeadlineIn(config_.command_timeout);
  if (absl::Status s =
          conn->Write(FormatCommand({"SSUBSCRIBE", channel}), deadline);
      !s.ok()) {
    conn->Shutdown();  // the listener drops it
    return s;
  }
  absl::MutexLock lock(&mu_);
  const absl::Time until = absl::Now() + config_.command_timeout;
  while (!subscribed_.contains(channel) && !refused_.contains(channel) &&
         conn_ == conn && !stopping_) {
    if (answered_.WaitWithDeadline(&mu_, until)) break;
  }
  if (subscribed_.contains(channel)) return true;
  if (auto it = refused_.find(channel); it != refused_.end()) {
    absl::Status refused = it->second;
    refused_.erase(it);
    return refused;
  }
  return absl::UnavailableError(absl::StrCat(
      "redis at ", config_.endpoint, " did not confirm SSUBSCRIBE within ",
      absl::FormatDuration(config_.command_timeout)));
}

void ShardSubscriber::Listen(const std::shared_ptr<Connection>& conn) {
  while (true) {
    std::vector<Reply> replies;
    if (!conn->ReadReplies(replies, kNoDeadline, stop_fd_).ok()) break;
    if (replies.empty()) break;  // Stop()
    for (const Reply& reply : replies) Handle(reply.get());
  }
  Drop(conn);
}

void ShardSubscriber::Handle(const redisReply* r) {
  const absl::string_view kind = PushKind(r);
  if (kind == "smessage") {
    callbacks_.on_message(
        absl::string_view(r->element[2]->str, r->element[2]->len));
    return;
  }
  bool moved = false;
  {
    absl::MutexLock lock(&mu_);
    if (kind == "ssubscribe") {
      const std::string channel = Element(r, 1);
      subscribed_.insert(channel);
      if (!asked_.empty() && asked_.front() == channel) asked_.pop_front();
    } else if (kind == "sunsubscribe") {
      // The node gave the slot away (a migration, a failover's
      // reconfiguration): its waiters must subscribe where it went.
      subscribed_.erase(Element(r, 1));
      moved = true;
    } else if (r->type == REDIS_REPLY_ERROR && !asked_.empty()) {
      // Errors answer commands in order: the oldest SSUBSCRIBE.
      moved = RedirectOf(r).has_value();
      refused_[asked_.front()] = ReplyError(r, "SSUBSCRIBE", config_.endpoint);
      asked_.pop_front();
    }
    answered_.SignalAll();
  }
  if (moved) {
    callbacks_.on_moved();
    if (kind == "sunsubscribe") callbacks_.on_gap();
  }
}

void ShardSubscriber::Drop(const std::shared_ptr<Connection>& conn) {
  {
    absl::MutexLock lock(&mu_);
    if (conn_ != conn) return;
    conn_.reset();
    subscribed_.clear();
    asked_.clear();
    answered_.SignalAll();
    if (stopping_) return;
  }
  // Announcements may have been missed: every waiter looks again and
  // subscribes anew.
  callbacks_.on_gap();
  callbacks_.on_moved();
}

}  // namespace dlock::redis
