// The zk:// backend's setup, shared helpers, introspection, force unlock,
// the session bound of holds and the background work. Acquisition lives in
// zk_acquire.cc, release and renewal in zk_release.cc.
#include "zk_backend.h"

#include <algorithm>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dlock::zk {
namespace {

// 64 random bits as hex. The client id alone does not tell two backends
// apart: ClientOptions::client_id may give two processes the same one.
std::string RandomHex() {
  std::random_device random;
  const uint64_t bits = (static_cast<uint64_t>(random()) << 32) ^ random();
  return absl::StrCat(absl::Hex(bits, absl::kZeroPad16));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> ZkBackend::Create(
    BackendSettings settings) {
  std::unique_ptr<ZkBackend> backend(new ZkBackend(std::move(settings)));
  absl::StatusOr<std::unique_ptr<Session>> session =
      Session::Open(backend->settings_.session, &backend->hub_);
  if (!session.ok()) return session.status();
  backend->session_ = *std::move(session);
  ZkBackend* self = backend.get();
  backend->session_->Start(
      Session::Events{.lost =
                          [self](uint64_t generation, const absl::Status& why) {
                            self->OnSessionLost(generation, why);
                          },
                      .tick = [self] { self->RetryPending(); }});
  return backend;
}

ZkBackend::ZkBackend(BackendSettings settings)
    : settings_(std::move(settings)),
      base_(
          absl::StrCat(settings_.chroot, "/dlock/", settings_.lock_namespace)),
      hub_(*settings_.clock),
      instance_(RandomHex()) {
  std::string path;
  for (absl::string_view part :
       absl::StrSplit(settings_.chroot, '/', absl::SkipEmpty())) {
    absl::StrAppend(&path, "/", part);
    ancestors_.push_back(path);
  }
  ancestors_.push_back(absl::StrCat(path, "/dlock"));
}

ZkBackend::~ZkBackend() { Shutdown(); }

void ZkBackend::Shutdown() {
  if (session_ == nullptr) return;
  // No background work may run on a session being closed.
  session_->Stop();
  // Ends the session: its ephemeral nodes go at once.
  session_.reset();
}

std::string ZkBackend::ParentOf(absl::string_view name) const {
  return absl::StrCat(base_, "/", EncodeName(name));
}

MonoTime ZkBackend::CallDeadline() const {
  return Now() + session_->call_timeout();
}

bool ZkBackend::Reconnected(MonoTime until) {
  return session_->WaitConnected(until);
}

bool ZkBackend::IsConnectionError(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
         rc == ZSESSIONMOVED || rc == ZTHROTTLEDOP;
}

absl::Status ZkBackend::EnsureParents(const std::string& parent,
                                      MonoTime deadline) {
  // The lock-name node and the namespace node are containers: ZooKeeper
  // deletes them once their last child is gone, so names never accumulate.
  auto create = [&](const std::string& path, int mode, bool open_acl) {
    Reply r = session_->Create(path, "", mode, open_acl).Wait(deadline);
    return r.rc == ZNODEEXISTS ? ZOK : r.rc;
  };
  int rc = create(parent, ZOO_CONTAINER, false);
  if (rc == ZNONODE) {
    for (const std::string& path : ancestors_) {
      rc = create(path, ZOO_PERSISTENT, true);
      if (rc != ZOK) break;
    }
    if (rc == ZOK) rc = create(base_, ZOO_CONTAINER, false);
    if (rc == ZOK) rc = create(parent, ZOO_CONTAINER, false);
  }
  if (rc == ZOK) return absl::OkStatus();
  return session_->ErrorStatus(rc, absl::StrCat("creating ", parent));
}

bool ZkBackend::Expired(const NodeData& data, const Stat& stat) const {
  return RemainingMs(data, stat.mtime) <= 0;
}

int64_t ZkBackend::RemainingMs(const NodeData& data, int64_t mtime) const {
  return mtime + data.lease_ms - session_->EstimatedServerNowMs();
}

absl::StatusOr<std::optional<ZkBackend::Holder>> ZkBackend::FindHolder(
    absl::string_view name) {
  const std::string parent = ParentOf(name);
  for (int attempt = 0; attempt < kWriteRetries; ++attempt) {
    Reply list = session_->Children(parent).Wait(CallDeadline());
    if (list.rc == ZNONODE) return std::nullopt;
    if (list.rc != ZOK) {
      return session_->ErrorStatus(list.rc,
                                   absl::StrCat("reading lock '", name, "'"));
    }
    std::vector<std::string> queue = SortedQueue(std::move(list.children));
    if (queue.empty()) return std::nullopt;
    Holder holder;
    holder.path = absl::StrCat(parent, "/", queue[0]);
    Reply got = session_->Get(holder.path, false).Wait(CallDeadline());
    if (got.rc == ZNONODE) continue;  // released meanwhile
    if (got.rc != ZOK) {
      return session_->ErrorStatus(got.rc,
                                   absl::StrCat("reading lock '", name, "'"));
    }
    std::optional<NodeData> data = Parse(got.data);
    if (!data.has_value()) {
      return absl::InternalError(
          absl::StrCat("node ", holder.path, " on ZooKeeper ",
                       session_->endpoint(), " is not a dlock lock node"));
    }
    holder.data = *std::move(data);
    holder.stat = got.stat;
    return std::optional<Holder>(std::move(holder));
  }
  return absl::UnavailableError(absl::StrCat(
      "lock '", name, "' changed hands too fast to read on ZooKeeper ",
      session_->endpoint()));
}

absl::StatusOr<std::optional<ZkBackend::LocalHold>> ZkBackend::HoldOf(
    absl::string_view name, absl::string_view owner) {
  {
    absl::MutexLock lock(&mu_);
    auto it = holds_.find(HoldKeyView(name, owner));
    if (it != holds_.end()) return std::optional<LocalHold>(it->second);
  }
  // Not taken through this client: an owner token may hold it elsewhere.
  absl::StatusOr<std::optional<Holder>> holder = FindHolder(name);
  if (!holder.ok()) return holder.status();
  if (!holder->has_value() || (*holder)->data.owner != owner ||
      Expired((*holder)->data, (*holder)->stat)) {
    return std::optional<LocalHold>();
  }
  const Holder& h = **holder;
  const int64_t age_ms = session_->EstimatedServerNowMs() - h.stat.mtime;
  return std::optional<LocalHold>(
      LocalHold{.path = h.path,
                .data = h.data,
                .version = h.stat.version,
                .czxid = static_cast<uint64_t>(h.stat.czxid),
                .mtime = h.stat.mtime,
                .generation = 0,
                .confirmed = Now() - absl::Milliseconds(age_ms)});
}

bool ZkBackend::Reload(LocalHold& hold, absl::string_view owner) {
  Reply got = session_->Get(hold.path, false).Wait(CallDeadline());
  if (got.rc != ZOK) return false;
  std::optional<NodeData> data = Parse(got.data);
  if (!data.has_value() || data->owner != owner) return false;
  hold.data = *std::move(data);
  hold.version = got.stat.version;
  hold.mtime = got.stat.mtime;
  return true;
}

void ZkBackend::Forget(absl::string_view name, absl::string_view owner,
                       const std::string& path) {
  absl::MutexLock lock(&mu_);
  auto it = holds_.find(HoldKeyView(name, owner));
  if (it != holds_.end() && it->second.path == path) holds_.erase(it);
}

std::optional<absl::Status> ZkBackend::LostWithSession(absl::string_view name,
                                                       absl::string_view owner,
                                                       bool consume) {
  absl::MutexLock lock(&mu_);
  auto it = lost_.find(HoldKeyView(name, owner));
  if (it == lost_.end()) return std::nullopt;
  absl::Status why = LostError(name, it->second.message());
  if (consume) lost_.erase(it);
  return why;
}

void ZkBackend::QueueDelete(PendingDelete pending) {
  absl::MutexLock lock(&mu_);
  pending_.push_back(std::move(pending));
}

BackendTraits ZkBackend::Traits() const {
  return BackendTraits{.fifo_waiting = true,
                       .holds_tied_to_session = true,
                       .holds_survive_restart = true,
                       .fencing = FencingStrength::kDurable,
                       .can_list = true};
}

MonoTime ZkBackend::HeldUntil(absl::string_view name, absl::string_view owner,
                              const HoldRecord*) {
  // The core calls this under its own mutex. mu_ is a leaf here: it is held
  // only around map lookups and updates, never across a call to the server
  // or into the listener, so this neither blocks for long nor deadlocks
  // with OnHoldLost().
  uint64_t generation;
  {
    absl::MutexLock lock(&mu_);
    auto it = holds_.find(HoldKeyView(name, owner));
    // Forgotten: released, taken over, or lost with its session.
    if (it == holds_.end()) return MonoTime::InfinitePast();
    generation = it->second.generation;
  }
  // Generation 0: a re-entry of a node another client created (an owner
  // token shared between clients, C6). That node lives on the other
  // client's session, which we cannot watch; our own session must at least
  // be alive for us to renew or release it.
  if (generation == 0) generation = session_->current_generation();
  return session_->BelievableUntil(generation);
}

absl::StatusOr<LockInfo> ZkBackend::Inspect(absl::string_view name) {
  absl::StatusOr<std::optional<Holder>> holder = FindHolder(name);
  if (!holder.ok()) return holder.status();
  LockInfo info;
  info.name = std::string(name);
  if (!holder->has_value() || Expired((*holder)->data, (*holder)->stat)) {
    return info;
  }
  const Holder& h = **holder;
  info.locked = true;
  info.owner = h.data.owner;
  info.hold_count = h.data.holds;
  info.fencing_token = static_cast<uint64_t>(h.stat.czxid);
  info.remaining_lease = absl::Milliseconds(h.stat.mtime + h.data.lease_ms -
                                            session_->EstimatedServerNowMs());
  info.since = absl::FromUnixMillis(h.data.since_ms != 0 ? h.data.since_ms
                                                         : h.stat.ctime);
  return info;
}

absl::StatusOr<std::vector<LockInfo>> ZkBackend::List(
    absl::string_view prefix) {
  Reply list = session_->Children(base_).Wait(CallDeadline());
  std::vector<LockInfo> out;
  if (list.rc == ZNONODE) return out;
  if (list.rc != ZOK) {
    return session_->ErrorStatus(list.rc, absl::StrCat("listing ", base_));
  }
  for (const std::string& child : list.children) {
    std::optional<std::string> name = DecodeName(child);
    if (!name.has_value() || !absl::StartsWith(*name, prefix)) continue;
    absl::StatusOr<LockInfo> info = Inspect(*name);
    if (!info.ok()) return info.status();
    if (info->locked) out.push_back(*std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const LockInfo& a, const LockInfo& b) {
    return a.name < b.name;
  });
  return out;
}

absl::Status ZkBackend::ForceUnlock(absl::string_view name) {
  absl::StatusOr<std::optional<Holder>> holder = FindHolder(name);
  if (!holder.ok()) return holder.status();
  if (!holder->has_value()) return absl::OkStatus();
  // Deleting the holder node wakes its successor through its watch; the
  // former holder's next renewal or release finds the node gone (C12).
  Reply r = session_->Delete((*holder)->path, -1).Wait(CallDeadline());
  if (r.rc == ZOK || r.rc == ZNONODE) return absl::OkStatus();
  return session_->ErrorStatus(
      r.rc, absl::StrCat("force unlock of lock '", name, "'"));
}

void ZkBackend::OnSessionLost(uint64_t generation, const absl::Status& why) {
  std::vector<HoldKey> lost;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = holds_.begin(); it != holds_.end();) {
      if (it->second.generation != generation) {
        ++it;
        continue;
      }
      // If the session lives on after all, the node must not keep the lock.
      pending_.push_back(PendingDelete{.path = it->second.path,
                                       .version = it->second.version});
      lost_[it->first] = why;
      lost.push_back(it->first);
      holds_.erase(it++);
    }
  }
  for (const HoldKey& key : lost) {
    settings_.listener->OnHoldLost(key.first, key.second, why);
  }
}

void ZkBackend::RetryPending() {
  std::vector<PendingDelete> work;
  {
    absl::MutexLock lock(&mu_);
    if (pending_.empty()) return;
    work.swap(pending_);
  }
  std::vector<PendingDelete> keep;
  // Short, so that the session thread soon gets back to its watch on the
  // connection.
  const MonoTime deadline =
      Now() + std::min(session_->call_timeout(), absl::Seconds(2));
  // An acquisition's node is never deleted blindly: another client of the
  // same owner token may have re-entered it (C6).
  auto give_up_own = [&](const std::string& path, const std::string& owner) {
    OwnNode own{.path = path, .data = NodeData{.owner = owner}};
    int rc = ReloadOwn(own, deadline);
    if (rc == ZOK) rc = TakeOwnHoldOff(own, deadline);
    return rc;
  };
  for (PendingDelete& p : work) {
    if (p.prefix.empty()) {
      const int rc = p.owner.empty()
                         ? session_->Delete(p.path, p.version).Wait(deadline).rc
                         : give_up_own(p.path, p.owner);
      if (IsConnectionError(rc)) keep.push_back(std::move(p));
      continue;
    }
    Reply list = session_->Children(p.path).Wait(deadline);
    if (IsConnectionError(list.rc)) {
      keep.push_back(std::move(p));
      continue;
    }
    bool done = true;
    for (const std::string& child : list.children) {
      if (!absl::StartsWith(child, p.prefix)) continue;
      const int rc = give_up_own(absl::StrCat(p.path, "/", child), p.owner);
      done = done && !IsConnectionError(rc);
    }
    if (!done) keep.push_back(std::move(p));
  }
  absl::MutexLock lock(&mu_);
  for (PendingDelete& p : keep) pending_.push_back(std::move(p));
}

}  // namespace dlock::zk
