#include "redis_mux.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace dlock::redis {

std::string FormatCommand(absl::Span<const std::string> argv) {
  size_t size = 16;
  for (const std::string& a : argv) size += a.size() + 16;
  std::string out;
  out.reserve(size);
  absl::StrAppend(&out, "*", argv.size(), "\r\n");
  for (const std::string& a : argv) {
    absl::StrAppend(&out, "$", a.size(), "\r\n", a, "\r\n");
  }
  return out;
}

MuxConnection::MuxConnection(std::unique_ptr<Connection> conn)
    : conn_(std::move(conn)) {}

bool MuxConnection::broken() const {
  absl::MutexLock lock(&mu_);
  return !broken_.ok();
}

absl::StatusOr<std::vector<Reply>> MuxConnection::Call(
    std::vector<std::string> commands) {
  if (commands.empty()) return std::vector<Reply>();
  std::vector<Request> requests(commands.size());
  absl::MutexLock lock(&mu_);
  if (!broken_.ok()) return broken_;
  for (size_t i = 0; i < commands.size(); ++i) {
    absl::StrAppend(&queued_, commands[i]);
    pending_.push_back(&requests[i]);
  }
  Request& last = requests.back();
  while (true) {
    // Write first, even when our replies are in: a caller leaves no queued
    // command behind with nobody to write it.
    if (!writing_ && !queued_.empty() && broken_.ok()) {
      writing_ = true;
      std::string batch;
      batch.swap(queued_);
      mu_.Unlock();
      absl::Status written = WriteAll(batch);
      mu_.Lock();
      writing_ = false;
      if (!written.ok()) FailAll(written);
      continue;
    }
    if (last.done) break;
    if (!reading_) {
      reading_ = true;
      std::vector<Reply> replies;
      mu_.Unlock();
      absl::Status read = ReadSome(replies);
      mu_.Lock();
      reading_ = false;
      if (!read.ok()) {
        FailAll(read);
        continue;
      }
      for (Reply& reply : replies) {
        if (pending_.empty()) {
          FailAll(absl::InternalError("redis sent a reply nobody asked for"));
          break;
        }
        Request* r = pending_.front();
        pending_.pop_front();
        r->reply = std::move(reply);
        r->done = true;
        r->wake.Signal();
      }
      continue;
    }
    last.wake.Wait(&mu_);
  }
  // Someone must go on reading for the callers still waiting.
  if (!reading_ && !pending_.empty()) pending_.front()->wake.Signal();
  if (!broken_.ok() && last.reply == nullptr) return broken_;
  std::vector<Reply> replies;
  replies.reserve(requests.size());
  for (Request& r : requests) {
    if (r.reply == nullptr) return broken_;
    replies.push_back(std::move(r.reply));
  }
  return replies;
}

void MuxConnection::FailAll(const absl::Status& status) {
  if (broken_.ok()) broken_ = status;
  queued_.clear();
  for (Request* r : pending_) {
    r->done = true;
    r->wake.Signal();
  }
  pending_.clear();
}

absl::Status MuxConnection::WriteAll(const std::string& bytes) {
  const int fd = conn_->context()->fd;
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + sent, bytes.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat("lost the connection to redis at ", conn_->endpoint(),
                       ": ", n < 0 ? std::strerror(errno) : "closed"));
    }
    sent += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status MuxConnection::ReadSome(std::vector<Reply>& replies) {
  redisContext* ctx = conn_->context();
  while (replies.empty()) {
    if (redisBufferRead(ctx) != REDIS_OK) {
      return absl::UnavailableError(absl::StrCat(
          "lost the connection to redis at ", conn_->endpoint(), ": ",
          ctx->errstr[0] != '\0' ? ctx->errstr : "no reply"));
    }
    void* raw = nullptr;
    while (redisGetReplyFromReader(ctx, &raw) == REDIS_OK && raw != nullptr) {
      replies.emplace_back(static_cast<redisReply*>(raw));
      raw = nullptr;
    }
    if (ctx->err != 0) {
      return absl::InternalError(absl::StrCat("unreadable reply from redis at ",
                                              conn_->endpoint(), ": ",
                                              ctx->errstr));
    }
  }
  return absl::OkStatus();
}

}  // namespace dlock::redis
