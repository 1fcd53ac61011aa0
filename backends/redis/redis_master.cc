#include "redis_master.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dlock/errors.h"

namespace dlock::redis {

std::set<std::string> CommandsCalledBy(absl::string_view body) {
  std::set<std::string> names;
  for (absl::string_view call : {"redis.call(", "redis.pcall("}) {
    for (size_t at = body.find(call); at != absl::string_view::npos;
         at = body.find(call, at)) {
      at += call.size();
      if (at >= body.size() || (body[at] != '\'' && body[at] != '"')) continue;
      const size_t end = body.find(body[at], at + 1);
      if (end == absl::string_view::npos) break;
      names.insert(absl::AsciiStrToUpper(body.substr(at + 1, end - at - 1)));
    }
  }
  return names;
}

Master::Master(ConnectionConfig config, std::string channel, WakeupHub* hub,
               Redial redial, ConnectCheck check)
    : config_(std::move(config)), redial_(redial), check_(std::move(check)) {
  if (hub != nullptr) {
    subscriber_ = std::make_unique<Subscriber>(
        config_, std::move(channel),
        Subscriber::Callbacks{.on_message =
                                  [hub](absl::string_view message) {
                                    WakeOnAnnouncement(*hub, message);
                                  },
                              .on_gap = [hub] { hub->NotifyAll(); }});
  }
}

Master::~Master() { Shutdown(); }

absl::Status Master::Start() {
  absl::StatusOr<std::unique_ptr<Connection>> conn = Connection::Open(config_);
  absl::Status loaded = conn.status();
  if (conn.ok()) loaded = scripts_.Load(**conn, endpoint());
  if (!loaded.ok()) scripts_ = Scripts();  // none half loaded: sent whole
  if (loaded.ok()) loaded = Check(**conn);
  if (redial_ == Redial::kInBackground) {
    // A master of a quorum that is down now is dialed again by the first
    // call that needs it, and its subscription keeps trying on its own.
    if (loaded.ok()) {
      absl::MutexLock lock(&mu_);
      mux_ = std::make_shared<MuxConnection>(*std::move(conn));
    }
    if (subscriber_ != nullptr) subscriber_->StartTrying();
    return loaded;
  }
  if (!loaded.ok()) return loaded;
  {
    absl::MutexLock lock(&mu_);
    mux_ = std::make_shared<MuxConnection>(*std::move(conn));
  }
  return subscriber_ != nullptr ? subscriber_->Start() : absl::OkStatus();
}

void Master::Shutdown() {
  if (subscriber_ != nullptr) subscriber_->Stop();
  std::thread dialer;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    mux_.reset();
    dialer.swap(dialer_);
  }
  // A dial in flight ends within connect_timeout and installs nothing.
  if (dialer.joinable()) dialer.join();
}

void Master::Reconnect() {
  absl::MutexLock lock(&mu_);
  ++moves_;
  if (mux_ != nullptr) mux_->Retire();
}

// One caller dials, outside every lock; callers that find a dial in flight
// fail at once instead of queueing behind it, so that against an address
// that swallows SYNs nobody (the watchdog included) waits more than one
// connect_timeout, and at most one dial is open at a time (C17, C18).
absl::StatusOr<std::shared_ptr<MuxConnection>> Master::Mux() {
  bool resubscribe = false;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return ClientClosedError(endpoint());
    if (mux_ != nullptr && !mux_->broken()) return mux_;
    // A server that answered READONLY (or LOADING, MASTERDOWN) likely holds
    // the subscription too, and a demoted master hears no releases: each
    // time the command connection is dialed again after such an answer, so
    // is the subscription, which thus follows the address to wherever it
    // leads now.
    resubscribe = mux_ != nullptr && mux_->wrong_server();
    if (dialing_) {
      return absl::UnavailableError(absl::StrCat("no connection to redis at ",
                                                 endpoint(), ": reconnecting",
                                                 last_failure_));
    }
    dialing_ = true;
    if (redial_ == Redial::kInBackground) {
      // The previous dialer has set dialing_ to false: it is about to end.
      if (dialer_.joinable()) dialer_.join();
      dialer_ = std::thread([this, resubscribe] { (void)Dial(resubscribe); });
      return absl::UnavailableError(absl::StrCat("no connection to redis at ",
                                                 endpoint(), ": reconnecting",
                                                 last_failure_));
    }
  }
  if (absl::Status dialed = Dial(resubscribe); !dialed.ok()) return dialed;
  absl::MutexLock lock(&mu_);
  if (shut_down_) return ClientClosedError(endpoint());
  return mux_;
}

absl::Status Master::Dial(bool resubscribe) {
  uint64_t moves_before = 0;
  {
    absl::MutexLock lock(&mu_);
    moves_before = moves_;
  }
  absl::StatusOr<std::unique_ptr<Connection>> conn = Connection::Open(config_);
  if (conn.ok()) {
    // A server restarted without its data has lost the layout's mark too.
    if (absl::Status s = Check(**conn); !s.ok()) conn = s;
  }
  absl::MutexLock lock(&mu_);
  dialing_ = false;
  if (conn.ok() && moves_ != moves_before) {
    conn = absl::UnavailableError(absl::StrCat(
        "the master moved while connecting to ", endpoint(), "; reconnecting"));
  }
  if (!conn.ok()) {
    last_failure_ =
        absl::StrCat(" (last attempt: ", conn.status().message(), ")");
    return conn.status();
  }
  last_failure_.clear();
  if (shut_down_) return ClientClosedError(endpoint());
  mux_ = std::make_shared<MuxConnection>(*std::move(conn));
  if (resubscribe && subscriber_ != nullptr) subscriber_->Resubscribe();
  return absl::OkStatus();
}

absl::Status Master::Check(Connection& conn) {
  return check_ ? check_(conn, scripts_) : absl::OkStatus();
}

absl::StatusOr<std::vector<Reply>> Master::Send(
    std::vector<std::string> commands) {
  absl::StatusOr<std::shared_ptr<MuxConnection>> mux = Mux();
  if (!mux.ok()) return mux.status();
  return (*mux)->Call(std::move(commands));
}

Master::Pending Master::Submit(std::vector<ScriptCall> calls) {
  Pending pending;
  pending.master_ = this;
  absl::StatusOr<std::shared_ptr<MuxConnection>> mux = Mux();
  if (!mux.ok()) {
    pending.failed_ = mux.status();
  } else {
    // Every call encoded into one string, as the connection writes them,
    // its room taken at once.
    size_t size = 0;
    for (const ScriptCall& call : calls) {
      size += scripts_.AppendedSizeBound(*call.script, call.keys, call.args);
    }
    std::string encoded;
    encoded.reserve(size);
    size_t commands = 0;
    for (const ScriptCall& call : calls) {
      if (call.asking) {
        AppendArrayHeader(encoded, 1);
        AppendBulk(encoded, "ASKING");
        ++commands;
      }
      scripts_.AppendCommand(encoded, *call.script, call.keys, call.args);
      ++commands;
    }
    pending.mux_ = *std::move(mux);
    pending.ticket_ = pending.mux_->Submit(std::move(encoded), commands);
  }
  pending.calls_ = std::move(calls);
  return pending;
}

std::vector<absl::StatusOr<Reply>> Master::Pending::Await() {
  std::vector<absl::StatusOr<Reply>> out;
  out.reserve(calls_.size());
  absl::StatusOr<std::vector<Reply>> replies =
      failed_.ok() ? mux_->Await(*ticket_) : failed_;
  if (!replies.ok()) {
    for (size_t i = 0; i < calls_.size(); ++i) out.push_back(replies.status());
    return out;
  }
  size_t next = 0;  // ASKING's replies (OK) are skipped
  for (size_t i = 0; i < calls_.size(); ++i) {
    const ScriptCall& call = calls_[i];
    if (call.asking) ++next;
    Reply reply = std::move((*replies)[next++]);
    if (IsNoScript(reply.get())) {
      // Rare (a restart, a flush): the body, which caches the script
      // again, after the library in function mode.
      std::vector<std::string> fallback;
      for (const std::vector<std::string>& command :
           master_->scripts_.Fallback(*call.script, call.keys, call.args)) {
        fallback.push_back(FormatCommand(command));
      }
      // ASKING counts for the one command after it: the script's body.
      if (call.asking) {
        fallback.insert(fallback.end() - 1, FormatCommand({"ASKING"}));
      }
      absl::StatusOr<std::vector<Reply>> again =
          mux_->Call(std::move(fallback));
      if (!again.ok()) {
        out.push_back(again.status());
        continue;
      }
      reply = std::move(again->back());
    }
    if (absl::Status s =
            ReplyError(reply.get(), call.script->name, master_->endpoint());
        !s.ok()) {
      if (IsAclRefusal(reply.get())) {
        s = absl::PermissionDeniedError(absl::StrCat(
            s.message(), "; the ", call.script->name, " script calls ",
            absl::StrJoin(CommandsCalledBy(call.script->body), ", ")));
      }
      out.push_back(s);
    } else {
      out.push_back(std::move(reply));
    }
  }
  return out;
}

absl::StatusOr<std::vector<Reply>> Master::Pending::FollowUp(
    std::vector<std::string> commands) {
  if (!failed_.ok()) return failed_;
  return mux_->Call(std::move(commands));
}

absl::StatusOr<Reply> Master::Run(const Script& script,
                                  std::vector<std::string> keys,
                                  std::vector<std::string> args) {
  std::vector<ScriptCall> calls;
  calls.push_back(ScriptCall{&script, std::move(keys), std::move(args)});
  return std::move(Submit(std::move(calls)).Await()[0]);
}

}  // namespace dlock::redis
