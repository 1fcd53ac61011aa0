#include "redis_connection.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace dlock::redis {
namespace {

// The error code of an error reply: its first word ("READONLY" of
// "READONLY You can't write against a read only replica.").
absl::string_view ErrorCode(const redisReply* reply) {
  absl::string_view text(reply->str, reply->len);
  return text.substr(0, text.find(' '));
}

// hiredis 0.14 believes an array's length: "*600000000" makes it allocate
// 4.8 GB before a single element came, and a negative length leaves an
// array that claims 2^64 - 2 elements and holds none (fixed in hiredis
// 1.0.1, CVE-2021-32765). dlock's longest replies are SCAN pages of about a
// thousand keys.
constexpr int kMostArrayElements = 1 << 20;

void* (*hiredis_create_array)(const redisReadTask*, int) = nullptr;

void* CreateCheckedArray(const redisReadTask* task, int elements) {
  // NULL makes the reader fail with REDIS_ERR_OOM.
  if (elements < 0 || elements > kMostArrayElements) return nullptr;
  return hiredis_create_array(task, elements);
}

// hiredis's own reply objects (freeReplyObject() frees them), with the
// length of an array checked first.
redisReplyObjectFunctions* CheckedReplyFunctions() {
  static redisReplyObjectFunctions functions = [] {
    redisReader* reader = redisReaderCreate();
    redisReplyObjectFunctions checked = *reader->fn;
    redisReaderFree(reader);
    hiredis_create_array = checked.createArray;
    checked.createArray = &CreateCheckedArray;
    return checked;
  }();
  return &functions;
}

// Where ReplyError() keeps a redirect's text for RedirectIn().
constexpr char kRedirectPayload[] = "dlock.redis/redirect";

std::optional<Redirect> ParseRedirect(absl::string_view text) {
  // "MOVED <slot> <host>:<port>", "ASK <slot> <host>:<port>".
  std::vector<absl::string_view> words = absl::StrSplit(text, ' ');
  Redirect out;
  if (words.size() != 3 || (words[0] != "MOVED" && words[0] != "ASK")) {
    return std::nullopt;
  }
  out.ask = words[0] == "ASK";
  const size_t colon = words[2].rfind(':');
  if (!absl::SimpleAtoi(words[1], &out.slot) || out.slot < 0 ||
      out.slot >= 16384 || colon == absl::string_view::npos ||
      !absl::SimpleAtoi(words[2].substr(colon + 1), &out.to.port)) {
    return std::nullopt;
  }
  out.to.host = std::string(words[2].substr(0, colon));
  return out;
}

}  // namespace

std::optional<Redirect> RedirectOf(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ERROR) return std::nullopt;
  return ParseRedirect(absl::string_view(reply->str, reply->len));
}

std::optional<Redirect> RedirectIn(const absl::Status& status) {
  auto text = status.GetPayload(kRedirectPayload);  // an absl::optional
  if (!text.has_value()) return std::nullopt;
  return ParseRedirect(std::string(*text));
}

absl::Status ReplyError(const redisReply* reply, absl::string_view what,
                        absl::string_view endpoint) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ERROR) {
    return absl::OkStatus();
  }
  absl::string_view text(reply->str, reply->len);
  const absl::string_view code = ErrorCode(reply);
  if (code == "NOAUTH" || code == "WRONGPASS") {
    return absl::UnauthenticatedError(
        absl::StrCat("redis at ", endpoint, " refused ", what, ": ", text));
  }
  if (IsAclRefusal(reply)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "redis at ", endpoint, " refused ", what, ": ", text,
        " (the ACL of the user this client logs in as does not allow it; "
        "docs/redis.md gives the ACL dlock needs)"));
  }
  if (MustReconnect(reply)) {
    return absl::UnavailableError(absl::StrCat("redis at ", endpoint,
                                               " cannot serve ", what,
                                               " (reconnecting): ", text));
  }
  if (RedirectOf(reply).has_value()) {
    absl::Status redirected = absl::InternalError(
        absl::StrCat("redis at ", endpoint, " redirected ", what, ": ", text,
                     " (a Redis Cluster node: use redis-cluster://)"));
    redirected.SetPayload(kRedirectPayload, absl::Cord(text));
    return redirected;
  }
  // A script still running; a cluster slot moving or without a master: the
  // server cannot serve now, and may shortly (a waiting acquire rides it
  // out, docs/semantics.md).
  if (code == "BUSY" || code == "TRYAGAIN" || code == "CLUSTERDOWN") {
    return absl::UnavailableError(absl::StrCat(
        "redis at ", endpoint, " cannot serve ", what, ": ", text));
  }
  return absl::InternalError(
      absl::StrCat("redis at ", endpoint, " failed ", what, ": ", text));
}

bool IsAclRefusal(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ERROR) return false;
  // Inside a script, Redis 7.0 answers "ERR The user executing the script
  // can't run this command or subcommand" (or "can't access at least one
  // of the keys"), naming neither the command nor NOPERM.
  return ErrorCode(reply) == "NOPERM" ||
         absl::StrContains(absl::string_view(reply->str, reply->len),
                           "The user executing the script can't");
}

bool MustReconnect(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ERROR) return false;
  const absl::string_view code = ErrorCode(reply);
  return code == "READONLY" || code == "MASTERDOWN" || code == "LOADING";
}

std::string FormatCommand(absl::Span<const std::string> argv) {
  size_t size = 16;
  for (const std::string& a : argv) size += a.size() + 16;
  std::string out;
  out.reserve(size);
  AppendArrayHeader(out, argv.size());
  for (const std::string& a : argv) AppendBulk(out, a);
  return out;
}

void AppendArrayHeader(std::string& out, size_t args) {
  absl::StrAppend(&out, "*", args, "\r\n");
}

void AppendBulk(std::string& out, absl::string_view arg) {
  absl::StrAppend(&out, "$", arg.size(), "\r\n", arg, "\r\n");
}

Connection::Connection(std::unique_ptr<Stream> stream,
                       absl::Duration command_timeout)
    : stream_(std::move(stream)),
      command_timeout_(command_timeout),
      reader_(redisReaderCreateWithFunctions(CheckedReplyFunctions())) {}

Connection::~Connection() { redisReaderFree(reader_); }

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(
    const ConnectionConfig& given, int cancel_fd) {
  ConnectionConfig config = given;
  if (given.locate) {
    absl::StatusOr<Address> address = given.locate(cancel_fd);
    if (!address.ok()) return address.status();
    config.host = address->host;
    config.port = address->port;
    config.endpoint = absl::StrCat(given.endpoint, " (now at ", address->host,
                                   ":", address->port, ")");
  }
  absl::StatusOr<std::unique_ptr<Stream>> stream =
      Dial(config.host, config.port, config.tls, config.endpoint,
           DeadlineIn(config.connect_timeout), cancel_fd);
  if (!stream.ok()) return stream.status();
  auto conn =
      std::make_unique<Connection>(*std::move(stream), config.command_timeout);
  if (absl::Status s = conn->SetUp(config); !s.ok()) return s;
  return conn;
}

absl::Status Connection::SetUp(const ConnectionConfig& config) {
  absl::Status status = SetUpSteps(config);
  // What the server answered is quoted, and a server may repeat the
  // password it was sent ("WRONGPASS <password> is wrong"): never shown.
  if (config.password.empty() ||
      !absl::StrContains(status.message(), config.password)) {
    return status;
  }
  return absl::Status(
      status.code(),
      absl::StrReplaceAll(status.message(), {{config.password, "***"}}));
}

absl::Status Connection::SetUpSteps(const ConnectionConfig& config) {
  if (!config.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!config.user.empty()) auth.push_back(config.user);
    auth.push_back(config.password);
    absl::StatusOr<Reply> reply = Command(auth);
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
    absl::StatusOr<Reply> reply = Command({"SELECT", absl::StrCat(config.db)});
    if (!reply.ok()) return reply.status();
    if (absl::Status s = ReplyError(reply->get(), "SELECT", config.endpoint);
        !s.ok()) {
      return s;
    }
  }
  if (!config.must_be_master) return absl::OkStatus();
  // A Sentinel may name the old master for a moment during a failover.
  absl::StatusOr<Reply> role = Command({"ROLE"});
  if (!role.ok()) return role.status();
  const redisReply* r = role->get();
  if (absl::Status s = ReplyError(r, "ROLE", config.endpoint); !s.ok()) {
    return s;
  }
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
      r->element[0]->type != REDIS_REPLY_STRING ||
      absl::string_view(r->element[0]->str, r->element[0]->len) != "master") {
    return absl::UnavailableError(
        absl::StrCat("redis at ", config.endpoint,
                     " is not a master (yet): the Sentinels are switching"));
  }
  return absl::OkStatus();
}

absl::Status Connection::Broken(absl::Status status) {
  broken_.store(true);
  return status;
}

absl::StatusOr<Reply> Connection::Command(
    const std::vector<std::string>& argv) {
  const Deadline deadline = DeadlineIn(command_timeout_);
  if (absl::Status s = Write(FormatCommand(argv), deadline); !s.ok()) return s;
  std::vector<Reply> replies;
  // One reply: what follows it (a subscription's first messages) stays
  // with the reader for the next read.
  if (absl::Status s = ReadReplies(replies, deadline, -1, 1); !s.ok()) {
    return s;
  }
  return std::move(replies[0]);
}

absl::Status Connection::Write(absl::string_view bytes, Deadline deadline) {
  if (broken()) {
    return absl::UnavailableError(
        absl::StrCat("lost the connection to redis at ", endpoint()));
  }
  absl::Status written = stream_->Write(bytes, deadline);
  if (written.ok()) return written;
  if (absl::IsDeadlineExceeded(written)) {
    written = absl::UnavailableError(
        absl::StrCat("redis at ", endpoint(), " took no command bytes within ",
                     absl::FormatDuration(command_timeout_)));
  }
  return Broken(WithPlaintextHint(written));
}

absl::Status Connection::TakeParsed(std::vector<Reply>& replies, size_t max) {
  size_t taken = 0;
  while (taken < max) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
      return Broken(
          absl::InternalError(absl::StrCat("unreadable reply from redis at ",
                                           endpoint(), ": ", reader_->errstr)));
    }
    if (raw == nullptr) break;
    replies.emplace_back(static_cast<redisReply*>(raw));
    replied_.store(true);
    ++taken;
  }
  return absl::OkStatus();
}

absl::Status Connection::ReadFailure(const absl::Status& status) {
  if (absl::IsDeadlineExceeded(status)) {
    return absl::UnavailableError(
        absl::StrCat("no reply from redis at ", endpoint(), " within ",
                     absl::FormatDuration(command_timeout_)));
  }
  return WithPlaintextHint(status);
}

absl::Status Connection::WithPlaintextHint(absl::Status status) const {
  if (stream_->tls() || replied_.load() || !absl::IsUnavailable(status)) {
    return status;
  }
  return absl::UnavailableError(
      absl::StrCat(status.message(),
                   " (before any reply: if this port takes only TLS, use "
                   "rediss://)"));
}

absl::Status Connection::ReadReplies(std::vector<Reply>& replies,
                                     Deadline deadline, int wake_fd,
                                     size_t max) {
  const size_t before = replies.size();
  while (true) {
    if (absl::Status s = TakeParsed(replies, max); !s.ok()) return s;
    if (replies.size() > before) return absl::OkStatus();
    if (broken()) {
      return absl::UnavailableError(
          absl::StrCat("lost the connection to redis at ", endpoint()));
    }
    char buf[16 * 1024];
    absl::StatusOr<size_t> n =
        stream_->Read(buf, sizeof(buf), deadline, wake_fd);
    if (!n.ok()) return Broken(ReadFailure(n.status()));
    if (*n == 0) return absl::OkStatus();  // woken
    if (redisReaderFeed(reader_, buf, *n) != REDIS_OK) {
      return Broken(
          absl::InternalError(absl::StrCat("unreadable reply from redis at ",
                                           endpoint(), ": ", reader_->errstr)));
    }
  }
}

}  // namespace dlock::redis
