// The zk:// backend's setup, shared helpers, introspection, force unlock,
// the session bound of holds and the background work. Acquisition lives in
// zk_acquire.cc, release and renewal in zk_release.cc.
#include "zk_backend.h"

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "zk_four_letter.h"

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
  {
    absl::MutexLock lock(&self->mu_);
    self->next_sweep_ = self->Now() + self->settings_.kept_sweep;
  }
  backend->session_->Start(
      Session::Events{.lost =
                          [self](uint64_t generation, const absl::Status& why) {
                            self->OnSessionLost(generation, why);
                          },
                      .tick =
                          [self] {
                            self->RetryPending();
                            // Short: the session thread has a connection
                            // to watch.
                            self->SweepKept(self->Now() + absl::Seconds(1));
                          }});
  return backend;
}

ZkBackend::ZkBackend(BackendSettings settings)
    : settings_(std::move(settings)),
      base_(
          absl::StrCat(settings_.chroot, "/dlock/", settings_.lock_namespace)),
      hub_(*settings_.clock),
      instance_(RandomHex()),
      node_prefix_(absl::StrCat(settings_.client_id, "-", instance_, "-")) {
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
  bool made_keep = false;
  {
    absl::MutexLock lock(&mu_);
    made_keep = made_keep_;
    if (made_keep) next_sweep_ = MonoTime::InfinitePast();
  }
  if (made_keep && Connected()) SweepKept(Now() + absl::Seconds(1));
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

absl::Status ZkBackend::LostWithSession(absl::string_view name,
                                        const ZkHold* record) {
  if (record == nullptr) return absl::OkStatus();
  std::optional<absl::Status> lost = record->lost();
  return lost.has_value() ? LostError(name, lost->message()) : absl::OkStatus();
}

absl::StatusOr<std::optional<LocalHold>> ZkBackend::HoldOf(
    absl::string_view name, absl::string_view owner, const ZkHold* record) {
  if (record != nullptr) {
    LocalHold hold = record->Get();
    if (record->live()) return std::optional<LocalHold>(std::move(hold));
    // Ended here (a release whose reply was lost, a race with another
    // call): its own node, as ZooKeeper has it now, and never another hold
    // of the same owner.
    Reply got = session_->Get(hold.path, false).Wait(CallDeadline());
    if (got.rc == ZNONODE) return std::optional<LocalHold>();
    if (got.rc != ZOK) {
      return session_->ErrorStatus(got.rc,
                                   absl::StrCat("reading lock '", name, "'"));
    }
    std::optional<NodeData> data = Parse(got.data);
    if (!data.has_value() || data->owner != owner || Expired(*data, got.stat)) {
      return std::optional<LocalHold>();
    }
    hold.data = *std::move(data);
    hold.version = got.stat.version;
    hold.mtime = got.stat.mtime;
    return std::optional<LocalHold>(std::move(hold));
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

void ZkBackend::QueueDelete(PendingDelete pending) {
  absl::MutexLock lock(&mu_);
  pending_.push_back(std::move(pending));
}

bool ZkBackend::Deleting(absl::string_view path) {
  auto covers = [&](const PendingDelete& p) {
    if (p.prefix.empty()) return p.path == path;
    absl::string_view child = path;
    return absl::ConsumePrefix(&child, p.path) &&
           absl::ConsumePrefix(&child, "/") &&
           absl::StartsWith(child, p.prefix);
  };
  absl::MutexLock lock(&mu_);
  return std::any_of(pending_.begin(), pending_.end(), covers) ||
         std::any_of(retrying_.begin(), retrying_.end(), covers);
}

BackendTraits ZkBackend::Traits() const {
  return BackendTraits{.fifo_waiting = true,
                       .holds_tied_to_session = true,
                       .holds_survive_restart = true,
                       .fencing = FencingStrength::kDurable,
                       .can_list = true,
                       .keeps_after_release = true};
}

MonoTime ZkBackend::HeldUntil(absl::string_view, absl::string_view,
                              const HoldRecord* record) {
  // The core calls this under its own mutex: atomic loads (the record's
  // and the session's), no lock, so this neither blocks nor deadlocks with
  // OnHoldLost().
  const ZkHold* hold = ZkHold::Of(record);
  // Ended: released, taken over, its lease ran out, or lost with its
  // session. (Every hold this backend grants has a record.)
  if (hold == nullptr || !hold->live()) return MonoTime::InfinitePast();
  uint64_t generation = hold->generation();
  // Generation 0: a re-entry of a node another client created (an owner
  // token shared between clients, C6). That node lives on the other
  // client's session, which we cannot watch; our own session must at least
  // be alive for us to renew or release it.
  if (generation == 0) generation = session_->current_generation();
  return session_->BelievableUntil(generation);
}

std::optional<int64_t> ZkBackend::KeptEnd(const Reply& read) {
  std::optional<KeptData> data = ParseKept(read.data);
  if (!data.has_value()) return std::nullopt;
  return read.stat.mtime + data->keep_ms;
}

absl::StatusOr<ZkBackend::Kept> ZkBackend::FindKept(absl::string_view name) {
  const std::string parent = ParentOf(name);
  Kept kept;
  Reply list = session_->Children(parent).Wait(CallDeadline());
  if (list.rc == ZNONODE) return kept;
  if (list.rc != ZOK) {
    return session_->ErrorStatus(list.rc,
                                 absl::StrCat("reading lock '", name, "'"));
  }
  int64_t latest = 0;
  for (const std::string& child : list.children) {
    if (!IsKeptNode(child)) continue;
    kept.paths.push_back(absl::StrCat(parent, "/", child));
    Reply got = session_->Get(kept.paths.back(), false).Wait(CallDeadline());
    if (got.rc == ZNONODE) continue;
    if (got.rc != ZOK) {
      return session_->ErrorStatus(got.rc,
                                   absl::StrCat("reading lock '", name, "'"));
    }
    std::optional<int64_t> end = KeptEnd(got);
    const int64_t now = session_->EstimatedServerNowMs();
    if (!end.has_value() || *end <= now || *end <= latest) continue;
    latest = *end;
    LockInfo info;
    info.name = std::string(name);
    info.locked = true;
    info.kept_after_release = true;
    info.fencing_token = ParseKept(got.data)->token;
    info.remaining_lease = absl::Milliseconds(*end - now);
    info.since = absl::FromUnixMillis(got.stat.ctime);
    kept.live = std::move(info);
  }
  return kept;
}

absl::StatusOr<LockInfo> ZkBackend::Inspect(absl::string_view name) {
  absl::StatusOr<Kept> kept = FindKept(name);
  if (!kept.ok()) return kept.status();
  // While kept, the first node of the queue is a waiter, not a holder.
  if (kept->live.has_value()) return *std::move(kept->live);
  absl::StatusOr<std::optional<Holder>> holder = FindHolder(name);
  if (!holder.ok()) return holder.status();
  LockInfo info;
  info.name = std::string(name);
  if (!holder->has_value() || Expired((*holder)->data, (*holder)->stat)) {
    return info;
  }
  const Holder& h = **holder;
  info.locked = true;
  // The holder's node lives on its session: held means live.
  info.holder_live = true;
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

absl::StatusOr<ServerMemory> ZkBackend::ServerMemoryUse() {
  // Every member holds the whole tree: the first that answers will do. (The
  // C client's zoo_get_current_server() formats into one buffer shared by
  // the whole process, which its own threads overwrite.)
  absl::Status error;
  for (absl::string_view server : absl::StrSplit(session_->hosts(), ',')) {
    absl::StatusOr<std::string> mntr =
        FourLetterWord(server, "mntr", session_->call_timeout());
    if (!mntr.ok()) {
      if (mntr.status().code() == absl::StatusCode::kUnimplemented) {
        return mntr.status();
      }
      if (error.ok()) error = mntr.status();
      continue;
    }
    absl::StatusOr<int64_t> bytes =
        MntrValue(*mntr, "zk_approximate_data_size");
    if (!bytes.ok()) return bytes.status();
    // Paths and data only: ZooKeeper's own overhead per node is not counted.
    return ServerMemory{*bytes, "mntr zk_approximate_data_size"};
  }
  return error;
}

absl::Status ZkBackend::ForceUnlock(absl::string_view name) {
  absl::StatusOr<Kept> kept = FindKept(name);
  if (!kept.ok()) return kept.status();
  for (const std::string& path : kept->paths) {
    // Its watchers (the first waiter) wake and take the lock.
    Reply r = session_->Delete(path, -1).Wait(CallDeadline());
    if (r.rc != ZOK && r.rc != ZNONODE) {
      return session_->ErrorStatus(
          r.rc, absl::StrCat("force unlock of lock '", name, "'"));
    }
  }
  // While it was kept, the first node of the queue is a waiter: it takes
  // the lock now, and is no hold to remove.
  if (kept->live.has_value()) return absl::OkStatus();
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

absl::Status ZkBackend::ForceUnlockIfToken(absl::string_view name,
                                           uint64_t fencing_token) {
  // Kept after its release: the kept node carries the released hold's
  // token, as Inspect reports it; the queue's first node is a waiter.
  absl::StatusOr<Kept> kept = FindKept(name);
  if (!kept.ok()) return kept.status();
  if (kept->live.has_value()) {
    if (kept->live->fencing_token != fencing_token) {
      return TokenMismatchError(name, fencing_token);
    }
    return ForceUnlock(name);
  }
  absl::StatusOr<std::optional<Holder>> holder = FindHolder(name);
  if (!holder.ok()) return holder.status();
  if (!holder->has_value() || Expired((*holder)->data, (*holder)->stat) ||
      static_cast<uint64_t>((*holder)->stat.czxid) != fencing_token) {
    return TokenMismatchError(name, fencing_token);
  }
  // The token is the node's czxid and its sequential path is never reused:
  // deleting that path removes that hold and no later one. ZNONODE: it was
  // released or force-unlocked since, so it is not held with the token.
  Reply r = session_->Delete((*holder)->path, -1).Wait(CallDeadline());
  if (r.rc == ZOK) return absl::OkStatus();
  if (r.rc == ZNONODE) return TokenMismatchError(name, fencing_token);
  return session_->ErrorStatus(
      r.rc, absl::StrCat("force unlock of lock '", name, "' on token ",
                         fencing_token));
}

std::shared_ptr<ZkHold> ZkBackend::NewRecord(absl::string_view name,
                                             absl::string_view owner,
                                             const LocalHold& hold) {
  auto record = std::make_shared<ZkHold>(name, owner, hold);
  // A node of another client's session: we cannot tell when that ends.
  if (hold.generation == 0) return record;
  absl::MutexLock lock(&mu_);
  if (session_holds_.size() >= prune_at_) {
    std::erase_if(session_holds_,
                  [](const std::weak_ptr<ZkHold>& r) { return r.expired(); });
    prune_at_ = std::max<size_t>(64, 2 * session_holds_.size());
  }
  session_holds_.push_back(record);
  return record;
}

void ZkBackend::OnSessionLost(uint64_t generation, const absl::Status& why) {
  std::vector<std::shared_ptr<ZkHold>> lost;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::weak_ptr<ZkHold>> kept;
    for (const std::weak_ptr<ZkHold>& weak : session_holds_) {
      std::shared_ptr<ZkHold> record = weak.lock();
      if (record == nullptr) continue;  // the core dropped it
      if (record->generation() != generation) {
        kept.push_back(weak);
        continue;
      }
      // Marked before the core is told: its release and renewal fail at
      // once from now on.
      std::optional<LocalHold> hold = record->LoseWithSession(why);
      if (!hold.has_value()) continue;  // ended already
      // If the session lives on after all, the node must not keep the lock.
      pending_.push_back(
          PendingDelete{.path = hold->path, .version = hold->version});
      lost.push_back(std::move(record));
    }
    session_holds_.swap(kept);
  }
  for (const std::shared_ptr<ZkHold>& record : lost) {
    settings_.listener->OnHoldLost(record->name(), record->owner(), why);
  }
}

void ZkBackend::RetryPending() {
  std::vector<PendingDelete> work;
  {
    absl::MutexLock lock(&mu_);
    if (pending_.empty()) return;
    work.swap(pending_);
    retrying_ = work;
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
    if (!p.kept_path.empty() && Now() < p.keep_until) {
      // A release that keeps the lock, never a bare delete that would free
      // it early (C21).
      const int rc = ReleaseKeeping(p.path, p.version, p.kept_path,
                                    p.kept_token, p.keep_until - Now())
                         .Wait(deadline)
                         .rc;
      if (IsConnectionError(rc)) keep.push_back(std::move(p));
      continue;
    }
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
  retrying_.clear();
}

}  // namespace dlock::zk
