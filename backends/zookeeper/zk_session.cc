// The zk:// session's life: its handle, the connection states the C client
// reports, expiry and replacement, the heartbeat that keeps an idle
// session's holds believable, and what a failed call means. The calls
// themselves are in zk_calls.cc.
#include "zk_session.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace dlock::zk {

namespace {

void OnAuth(int, const void*) {}

// The C client logs connection attempts at INFO to stderr; a library must
// not write there. DLOCK_ZK_LOG=1 brings the log back for debugging.
void ClientLog(const char* message) {
  static const bool enabled = std::getenv("DLOCK_ZK_LOG") != nullptr;
  if (enabled) std::fprintf(stderr, "%s\n", message);
}

// Watcher context: events of a handle that was replaced are ignored.
struct HandleContext {
  Session* session;
  uint64_t generation;
};

}  // namespace

Session::Session(Options options, WakeupHub* hub)
    : options_(std::move(options)),
      hub_(hub),
      liveness_(std::make_shared<Liveness>(options_.session_timeout)),
      // Until a write of ours tells ZooKeeper's time, assume our date.
      clock_offset_ms_(
          absl::ToUnixMillis(absl::Now()) -
          absl::ToInt64Milliseconds(hub->clock().Now().since_origin())),
      changed_(hub->clock()) {
  acl_entries_[0] = ACL{ZOO_PERM_ALL, ZOO_AUTH_IDS};
  acl_entries_[1] = ACL{ZOO_PERM_READ, ZOO_ANYONE_ID_UNSAFE};
  acl_ = ACL_vector{2, acl_entries_};
}

absl::StatusOr<std::unique_ptr<Session>> Session::Open(Options options,
                                                       WakeupHub* hub) {
  std::unique_ptr<Session> session(new Session(std::move(options), hub));
  {
    absl::WriterMutexLock lock(&session->handle_mu_);
    session->handle_ = session->NewHandle();
    if (session->handle_ == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("cannot start a ZooKeeper client for ",
                       session->endpoint(), ": ", std::strerror(errno)));
    }
  }
  const absl::Duration wait = session->options_.connect_timeout;
  if (!session->WaitConnected(session->clock().Now() + wait)) {
    return absl::UnavailableError(
        absl::StrCat("no ZooKeeper server of ", session->endpoint(),
                     " accepted a session within ", absl::FormatDuration(wait),
                     " (connect_timeout)"));
  }
  return session;
}

void Session::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  changed_.Signal();
  if (thread_.joinable()) thread_.join();
}

Session::~Session() {
  Stop();
  absl::WriterMutexLock lock(&handle_mu_);
  if (handle_ != nullptr) {
    auto* context = static_cast<HandleContext*>(
        const_cast<void*>(zoo_get_context(handle_)));
    // Closing ends the session on the server, which removes its ephemeral
    // nodes at once instead of after the session timeout (C13).
    zookeeper_close(handle_);
    delete context;
    handle_ = nullptr;
  }
}

void Session::Start(Events events) {
  events_ = std::move(events);
  thread_ = std::thread([this] { Loop(); });
}

zhandle_t* Session::NewHandle() {
  uint64_t generation;
  {
    absl::MutexLock lock(&mu_);
    generation = generation_;
  }
  auto* context = new HandleContext{this, generation};
  const int timeout_ms =
      static_cast<int>(absl::ToInt64Milliseconds(options_.session_timeout));
  zhandle_t* zh = zookeeper_init2(options_.hosts.c_str(), &Session::Watcher,
                                  timeout_ms, nullptr, context, 0, &ClientLog);
  if (zh == nullptr) {
    delete context;
    return nullptr;
  }
  if (!options_.digest.empty()) {
    // Queued before any request and sent again on every reconnect.
    zoo_add_auth(zh, "digest", options_.digest.data(),
                 static_cast<int>(options_.digest.size()), &OnAuth, nullptr);
  }
  return zh;
}

void Session::Watcher(zhandle_t* zh, int type, int state, const char* path,
                      void* context) {
  auto* handle_context = static_cast<HandleContext*>(context);
  Session* self = handle_context->session;
  if (type != ZOO_SESSION_EVENT) {
    if (path == nullptr) return;
    const absl::string_view changed(path);
    self->hub_->Notify(changed);
    // An object's watchers wait on its parent (ObjectWatch): a change of a
    // node in its queue (the leader's data) is a change of the object.
    if (const size_t slash = changed.rfind('/');
        type != ZOO_CHILD_EVENT && slash != absl::string_view::npos &&
        slash > 0) {
      self->hub_->Notify(changed.substr(0, slash));
    }
    return;
  }
  bool reconnected = false;
  {
    absl::MutexLock lock(&self->mu_);
    if (handle_context->generation != self->generation_) return;
    if (state == ZOO_CONNECTED_STATE) {
      reconnected = self->was_connected_;
      self->connected_ = true;
      self->was_connected_ = true;
      // The ensemble may have clamped the timeout we asked for.
      self->liveness_->SetTimeout(absl::Milliseconds(zoo_recv_timeout(zh)));
    } else if (state == ZOO_EXPIRED_SESSION_STATE ||
               state == ZOO_AUTH_FAILED_STATE) {
      self->connected_ = false;
      self->expired_ = true;
      // Its nodes are gone: no hold of it is believed from now on, before
      // the session thread gets round to telling the holders.
      self->liveness_->Distrust();
    } else {
      // A disconnection alone ends nothing: the holds stay believable as
      // long as BelievableUntil() says, whatever the C client noticed.
      self->connected_ = false;
    }
    self->changed_.Signal();
  }
  // Watches are re-armed by the C client, but a release may have happened
  // while we were away: every waiter looks again.
  if (reconnected) self->hub_->NotifyAll();
}

bool Session::WaitConnected(MonoTime until) {
  absl::MutexLock lock(&mu_);
  while (!connected_ && !stopping_ && clock().Now() < until) {
    changed_.WaitUntil(&mu_, until);
  }
  return connected_;
}

uint64_t Session::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

int64_t Session::EstimatedServerNowMs() const {
  const int64_t local_ms =
      absl::ToInt64Milliseconds(clock().Now().since_origin());
  absl::MutexLock lock(&mu_);
  return local_ms + clock_offset_ms_;
}

void Session::NoteServerTime(int64_t server_ms, MonoTime local_reply) {
  absl::MutexLock lock(&mu_);
  clock_offset_ms_ =
      server_ms - absl::ToInt64Milliseconds(local_reply.since_origin());
}

void Session::Loop() {
  constexpr absl::Duration kTick = absl::Milliseconds(50);
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    changed_.WaitUntil(&mu_, clock().Now() + kTick);
    if (stopping_) break;
    const MonoTime now = clock().Now();
    if (expired_) {
      const uint64_t old_generation = generation_;
      mu_.Unlock();
      {
        absl::WriterMutexLock handle_lock(&handle_mu_);
        if (handle_ != nullptr) {
          auto* context = static_cast<HandleContext*>(
              const_cast<void*>(zoo_get_context(handle_)));
          zookeeper_close(handle_);
          delete context;
        }
        {
          absl::MutexLock state_lock(&mu_);
          ++generation_;
          liveness_->NewSession(generation_);
          expired_ = false;
          connected_ = false;
          was_connected_ = false;
          lost_at_bound_ = MonoTime::InfinitePast();
          heartbeat_sent_ = MonoTime::InfinitePast();
        }
        handle_ = NewHandle();
      }
      events_.lost(old_generation,
                   absl::FailedPreconditionError(absl::StrCat(
                       "the ZooKeeper session with ", options_.endpoint,
                       " expired, which removed its lock nodes")));
      hub_->NotifyAll();
      mu_.Lock();
      continue;
    }
    ReportUnbelievable(now);
    if (stopping_ || expired_) continue;
    if (connected_) {
      Heartbeat(now);
      mu_.Unlock();
      if (events_.tick) events_.tick();
      mu_.Lock();
    }
  }
}

void Session::Heartbeat(MonoTime now) {
  const absl::Duration third = liveness_->timeout() / 3;
  if (now - std::max(liveness_->LastReplied(), heartbeat_sent_) < third) {
    return;
  }
  heartbeat_sent_ = now;
  mu_.Unlock();
  // The root always exists, and reading it needs no right; the reply is
  // all we want (Complete() notes it).
  Exists("/", /*watch=*/false);
  mu_.Lock();
}

void Session::ReportUnbelievable(MonoTime now) {
  const MonoTime until = liveness_->BelievableUntil(generation_);
  if (until <= lost_at_bound_ || now < until) return;
  lost_at_bound_ = until;
  const uint64_t generation = generation_;
  const absl::Duration silent = now - liveness_->LastReplied();
  mu_.Unlock();
  // The core stopped believing these holds at the same bound; this tells
  // the backend to forget them and to remove their nodes if the session
  // lives on after all.
  events_.lost(generation, absl::UnavailableError(absl::StrCat(
                               "no ZooKeeper server of ", options_.endpoint,
                               " answered a request sent in the last ",
                               absl::FormatDuration(silent),
                               "; the session may have expired")));
  mu_.Lock();
}

absl::Status Session::ErrorStatus(int rc, absl::string_view what) const {
  const std::string message =
      absl::StrCat(what, " on ZooKeeper ", options_.endpoint, ": ", zerror(rc));
  switch (rc) {
    case ZCONNECTIONLOSS:
    case ZOPERATIONTIMEOUT:
    case ZSESSIONEXPIRED:
    case ZSESSIONMOVED:
    case ZINVALIDSTATE:
    case ZCLOSING:
    case ZTHROTTLEDOP:
    case ZNOTREADONLY:
      return absl::UnavailableError(message);
    case ZAUTHFAILED:  // the ensemble did not accept the credential
      return absl::UnauthenticatedError(
          absl::StrCat(message, " (check the auth= credential)"));
    case ZNOAUTH:
    case ZINVALIDACL:
      return absl::PermissionDeniedError(absl::StrCat(
          message, " (the auth= credential of this client lacks the right)"));
    case ZNONODE:
    case ZBADVERSION:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace dlock::zk
