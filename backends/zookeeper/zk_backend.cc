// Release, renewal, introspection, force unlock and the background work of
// the zk:// backend. Acquisition lives in zk_acquire.cc.
#include "zk_backend.h"

#include <algorithm>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dlock::zk {
namespace {

absl::Status NotOwner(absl::string_view name) {
  return absl::FailedPreconditionError(absl::StrCat(
      "lock '", name,
      "' is not held by this owner (released, expired, force-unlocked or "
      "taken over)"));
}

absl::Status LeaseRanOut(absl::string_view name, absl::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat("the lease of lock '", name, "' ran out before the ", what));
}

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
    auto it = holds_.find(HoldKey(name, owner));
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
  auto it = holds_.find(HoldKey(name, owner));
  if (it != holds_.end() && it->second.path == path) holds_.erase(it);
}

std::optional<absl::Status> ZkBackend::LostWithSession(absl::string_view name,
                                                       absl::string_view owner,
                                                       bool consume) {
  absl::MutexLock lock(&mu_);
  auto it = lost_.find(HoldKey(name, owner));
  if (it == lost_.end()) return std::nullopt;
  absl::Status why = absl::FailedPreconditionError(
      absl::StrCat("lock '", name, "' was lost: ", it->second.message()));
  if (consume) lost_.erase(it);
  return why;
}

void ZkBackend::QueueDelete(PendingDelete pending) {
  absl::MutexLock lock(&mu_);
  pending_.push_back(std::move(pending));
}

absl::Status ZkBackend::Write(absl::string_view name, absl::string_view owner,
                              LocalHold& hold, const NodeData& next,
                              absl::string_view what) {
  if (!Connected()) {
    return session_->ErrorStatus(ZCONNECTIONLOSS,
                                 absl::StrCat(what, " of lock '", name, "'"));
  }
  const std::string payload = Serialize(next);
  Call set = session_->Set(hold.path, payload, hold.version);
  Reply r = set.Wait(CallDeadline());
  if (IsConnectionError(r.rc) &&
      Reconnected(Now() +
                  std::min(session_->call_timeout(), absl::Seconds(3)))) {
    // Sent, reply lost: it happened iff the node holds exactly our write.
    Reply check = session_->Get(hold.path, false).Wait(CallDeadline());
    if (check.rc == ZOK && check.stat.version == hold.version + 1 &&
        check.data == payload) {
      r = check;
    }
  }
  switch (r.rc) {
    case ZOK: {
      hold.data = next;
      hold.version = r.stat.version;
      hold.mtime = r.stat.mtime;
      hold.confirmed = set.sent();
      session_->NoteServerTime(r.stat.mtime, Now());
      absl::MutexLock lock(&mu_);
      auto it = holds_.find(HoldKey(name, owner));
      if (it != holds_.end() && it->second.path == hold.path) it->second = hold;
      return absl::OkStatus();
    }
    case ZBADVERSION:
      if (Reload(hold, owner)) return absl::AbortedError("version conflict");
      [[fallthrough]];
    case ZNONODE:
      Forget(name, owner, hold.path);
      return NotOwner(name);
    default:
      return session_->ErrorStatus(r.rc,
                                   absl::StrCat(what, " of lock '", name, "'"));
  }
}

absl::StatusOr<int64_t> ZkBackend::Release(absl::string_view name,
                                           absl::string_view owner,
                                           int64_t holds) {
  if (auto lost = LostWithSession(name, owner, /*consume=*/true)) return *lost;
  absl::StatusOr<std::optional<LocalHold>> found = HoldOf(name, owner);
  if (!found.ok()) return found.status();
  if (!found->has_value()) return NotOwner(name);
  LocalHold hold = **found;
  if (Now() > hold.confirmed + absl::Milliseconds(hold.data.lease_ms)) {
    Forget(name, owner, hold.path);
    if (hold.generation != 0) {
      QueueDelete(PendingDelete{.path = hold.path, .version = hold.version});
    }
    return LeaseRanOut(name, "release");
  }
  bool delete_sent = false;
  for (int attempt = 0; attempt < kWriteRetries; ++attempt) {
    if (hold.data.holds > holds) {
      // Fewer holds, the same expiry: the write moves mtime to now.
      NodeData next = hold.data;
      next.holds -= holds;
      next.lease_ms = std::max<int64_t>(1, RemainingMs(hold.data, hold.mtime));
      absl::Status s = Write(name, owner, hold, next, "release");
      if (absl::IsAborted(s)) continue;
      if (!s.ok()) return s;
      return next.holds;
    }
    if (!Connected()) {
      return session_->ErrorStatus(
          ZCONNECTIONLOSS, absl::StrCat("release of lock '", name, "'"));
    }
    Reply r = session_->Delete(hold.path, hold.version).Wait(CallDeadline());
    if (r.rc == ZOK) {
      Forget(name, owner, hold.path);
      return 0;
    }
    if (r.rc == ZNONODE) {
      Forget(name, owner, hold.path);
      if (delete_sent && OurDeleteRan(hold)) return 0;
      return NotOwner(name);
    }
    if (r.rc == ZBADVERSION) {
      if (Reload(hold, owner)) continue;
      Forget(name, owner, hold.path);
      return NotOwner(name);
    }
    if (!IsConnectionError(r.rc)) {
      return session_->ErrorStatus(
          r.rc, absl::StrCat("release of lock '", name, "'"));
    }
    // The delete went out and its reply was lost. Try again once the
    // connection is back; failing that, a background task retries until the
    // delete is confirmed. Until then the node keeps everyone else out.
    delete_sent = true;
    if (!Reconnected(Now() +
                     std::min(session_->call_timeout(), absl::Seconds(3)))) {
      // Not known to have happened: the core retries the release (C21).
      Forget(name, owner, hold.path);
      QueueDelete(PendingDelete{.path = hold.path, .version = hold.version});
      return session_->ErrorStatus(
          r.rc, absl::StrCat("release of lock '", name, "'"));
    }
  }
  return absl::UnavailableError(absl::StrCat("release of lock '", name,
                                             "' kept conflicting on ZooKeeper ",
                                             session_->endpoint()));
}

MonoTime ZkBackend::HeldUntil(absl::string_view name, absl::string_view owner) {
  // The core calls this under its own mutex. mu_ is a leaf here: it is held
  // only around map lookups and updates, never across a call to the server
  // or into the listener, so this neither blocks for long nor deadlocks
  // with OnHoldLost().
  uint64_t generation;
  {
    absl::MutexLock lock(&mu_);
    auto it = holds_.find(HoldKey(name, owner));
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

bool ZkBackend::OurDeleteRan(const LocalHold& hold) {
  // Our delete went out, its reply was lost, and now the node is gone. Who
  // else removes a lock node?
  // - A successor, and only once the node's lease is over on ZooKeeper's
  //   clock: it deletes the node (at the version it read) only if the
  //   node's mtime plus lease_ms is not after the mtime of its own write.
  //   Our last confirmed write, which set lease_ms, was sent at
  //   `hold.confirmed`, so ZooKeeper stamped it no earlier; until
  //   confirmed + lease (less a drift margin) has passed here, the node's
  //   lease cannot be over there. This NONODE came back before that, so no
  //   successor can have removed the node before it was read.
  // - The end of the session that owns the node: then the session changed.
  // - A force unlock (C12) or the owner token's release from another
  //   client (C6), both asked by the owner's side: either way the lock was
  //   let go for the owner, and this release counts as done.
  // Past that point nothing tells our delete from a successor's, and only a
  // delete known to have taken effect may count (C4): the caller reports
  // the hold as not held.
  if (hold.generation != 0 && session_->generation() != hold.generation) {
    return false;
  }
  const absl::Duration lease = absl::Milliseconds(hold.data.lease_ms);
  return Now() < hold.confirmed + lease - lease / 100 - absl::Milliseconds(2);
}

absl::Status ZkBackend::Renew(const RenewCall& call) {
  if (auto lost = LostWithSession(call.name, call.owner, false)) return *lost;
  absl::StatusOr<std::optional<LocalHold>> found =
      HoldOf(call.name, call.owner);
  if (!found.ok()) return found.status();
  if (!found->has_value()) return NotOwner(call.name);
  LocalHold hold = **found;
  if (Now() > hold.confirmed + absl::Milliseconds(hold.data.lease_ms)) {
    Forget(call.name, call.owner, hold.path);
    if (hold.generation != 0) {
      QueueDelete(PendingDelete{.path = hold.path, .version = hold.version});
    }
    return LeaseRanOut(call.name, "renewal");
  }
  const int64_t lease_ms =
      std::max<int64_t>(1, absl::ToInt64Milliseconds(call.lease));
  absl::Status s = absl::AbortedError("not written");
  for (int i = 0; i < kWriteRetries && absl::IsAborted(s); ++i) {
    NodeData next = hold.data;
    next.kept_ms = std::max(next.kept_ms, lease_ms);
    next.lease_ms = next.kept_ms;
    s = Write(call.name, call.owner, hold, next, "renewal");
  }
  return s;
}

std::vector<absl::Status> ZkBackend::RenewMany(
    absl::Span<const RenewCall> calls) {
  // The watchdog's batch goes out pipelined: one round trip for all of them.
  struct InFlight {
    size_t index;
    LocalHold hold;
    NodeData next;
    Call call;
  };
  std::vector<absl::Status> results(calls.size());
  std::vector<InFlight> in_flight;
  std::vector<size_t> one_by_one;
  const MonoTime now = Now();
  for (size_t i = 0; i < calls.size(); ++i) {
    std::optional<LocalHold> hold;
    {
      absl::MutexLock lock(&mu_);
      auto it = holds_.find(HoldKey(calls[i].name, calls[i].owner));
      if (it != holds_.end()) hold = it->second;
    }
    if (!hold.has_value() ||
        now > hold->confirmed + absl::Milliseconds(hold->data.lease_ms) ||
        !Connected()) {
      one_by_one.push_back(i);
      continue;
    }
    NodeData next = hold->data;
    next.kept_ms = std::max<int64_t>(
        next.kept_ms,
        std::max<int64_t>(1, absl::ToInt64Milliseconds(calls[i].lease)));
    next.lease_ms = next.kept_ms;
    Call call = session_->Set(hold->path, Serialize(next), hold->version);
    in_flight.push_back(InFlight{i, *std::move(hold), next, std::move(call)});
  }
  const MonoTime deadline = CallDeadline();
  for (InFlight& f : in_flight) {
    Reply r = f.call.Wait(deadline);
    const RenewCall& c = calls[f.index];
    if (r.rc == ZOK) {
      f.hold.data = f.next;
      f.hold.version = r.stat.version;
      f.hold.mtime = r.stat.mtime;
      f.hold.confirmed = f.call.sent();
      session_->NoteServerTime(r.stat.mtime, Now());
      absl::MutexLock lock(&mu_);
      auto it = holds_.find(HoldKey(c.name, c.owner));
      if (it != holds_.end() && it->second.path == f.hold.path) {
        it->second = f.hold;
      }
    } else if (r.rc == ZNONODE) {
      Forget(c.name, c.owner, f.hold.path);
      results[f.index] = NotOwner(c.name);
    } else {
      one_by_one.push_back(f.index);  // a conflict or a lost reply
    }
  }
  for (size_t i : one_by_one) results[i] = Renew(calls[i]);
  return results;
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
