#include "redis_connection.h"

#include <fcntl.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dlock::redis {
absl::Status ReplyError(const redisReply* reply, absl::string_view what,
                        absl::string_view endpoint) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ERROR) {
    return absl::OkStatus();
  }
  absl::string_view text(reply->str, reply->len);
  if (absl::StartsWith(text, "NOAUTH") || absl::StartsWith(text, "WRONGPASS")) {
    return absl::UnauthenticatedError(
        absl::StrCat("redis at ", endpoint, " refused ", what, ": ", text));
  }
  if (absl::StartsWith(text, "LOADING") || absl::StartsWith(text, "BUSY") ||
      absl::StartsWith(text, "MASTERDOWN") ||
      absl::StartsWith(text, "READONLY")) {
    return absl::UnavailableError(absl::StrCat(
        "redis at ", endpoint, " cannot serve ", what, ": ", text));
  }
  return absl::InternalError(
      absl::StrCat("redis at ", endpoint, " failed ", what, ": ", text));
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(
    const ConnectionConfig& config) {
  redisContext* ctx =
      redisConnectWithTimeout(config.host.c_str(), config.port,
                              absl::ToTimeval(config.connect_timeout));
  if (ctx == nullptr || ctx->err != 0) {
    std::string why = ctx != nullptr ? ctx->errstr : "out of memory";
    if (ctx != nullptr) redisFree(ctx);
    return absl::UnavailableError(absl::StrCat("cannot connect to redis at ",
                                               config.endpoint, ": ", why));
  }
  // hiredis 0.14 does not set close-on-exec: without it every program the
  // process execs would inherit the connection.
  if (const int flags = fcntl(ctx->fd, F_GETFD);
      flags < 0 || fcntl(ctx->fd, F_SETFD, flags | FD_CLOEXEC) != 0) {
    const int error = errno;
    redisFree(ctx);
    return absl::InternalError(
        absl::StrCat("cannot set close-on-exec on the connection to redis at ",
                     config.endpoint, ": ", strerror(error)));
  }
  redisSetTimeout(ctx, absl::ToTimeval(config.command_timeout));
  redisEnableKeepAlive(ctx);
  std::unique_ptr<Connection> conn(new Connection(ctx, config.endpoint));
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
