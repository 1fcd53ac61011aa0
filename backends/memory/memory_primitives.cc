// memory://: semaphores, a lock's readers and elections (issue 24), each
// one step under the instance's mutex on a Holders object; waiters and
// watchers sleep on the namespace's WakeupHub.
#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/backend/rules.h"
#include "memory_backend.h"

namespace dlock::memory {
namespace {

char LetterOf(const HoldShape& shape) {
  // A lock's readers are its only Holders object.
  return shape.kind == ObjectKind::kLock ? 'r' : KindLetter(shape.kind);
}

std::string Marked(char letter, absl::string_view name) {
  return absl::StrCat("\x1f", absl::string_view(&letter, 1), name);
}

constexpr HoldShape kReaders{.kind = ObjectKind::kLock,
                             .mode = HoldMode::kShared};

// A watch is a hub waiter; it keeps the instance, which owns the hub.
class HubWatch : public ObjectWatch {
 public:
  HubWatch(std::shared_ptr<MemoryInstance> instance, WakeupHub& hub,
           absl::string_view name)
      : instance_(std::move(instance)), waiter_(hub, name) {}
  bool Wait(MonoTime until, const CancelToken& cancel) override {
    return waiter_.Wait(until, cancel);
  }

 private:
  const std::shared_ptr<MemoryInstance> instance_;
  WakeupHub::Waiter waiter_;
};

}  // namespace

std::string MemoryBackend::ObjectKey(const HoldShape& shape,
                                     absl::string_view name) const {
  return absl::StrCat(prefix_, Marked(LetterOf(shape), name));
}

std::string MemoryBackend::HubName(const HoldShape& shape,
                                   absl::string_view name) {
  if (shape.kind == ObjectKind::kLock) return std::string(name);
  return Marked(LetterOf(shape), name);
}

absl::StatusOr<Grant> MemoryBackend::AcquireShaped(const AcquireCall& call) {
  const std::string key = ObjectKey(call.shape, call.name);
  const std::string hub_name = HubName(call.shape, call.name);
  std::vector<int64_t> slots;
  absl::StatusOr<Grant> grant =
      AcquireWithWakeups(call, hub_name, releases_, fallback_poll_,
                         [&]() -> absl::StatusOr<Attempt> {
                           return TryShapedOnce(key, call, slots);
                         });
  if (!grant.ok()) {
    GiveUpPlace(key, call);
    return grant.status();
  }
  grant->slots = std::move(slots);
  // Observers of an election learn of every new leader (C24).
  if (call.shape.kind == ObjectKind::kElection) releases_.Notify(hub_name);
  return grant;
}

absl::StatusOr<Attempt> MemoryBackend::TryShapedOnce(
    const std::string& key, const AcquireCall& call,
    std::vector<int64_t>& slots) {
  absl::MutexLock lock(&instance_->mu);
  const MonoTime now = clock_.Now();
  Holders& object = instance_->objects[key];
  object.Purge(now);
  absl::StatusOr<Attempt> attempt = call.shape.mode == HoldMode::kShared
                                        ? TakeRead(object, call, now)
                                        : TakePermits(object, call, now, slots);
  if (object.empty()) instance_->objects.erase(key);
  return attempt;
}

absl::StatusOr<Attempt> MemoryBackend::TakePermits(
    Holders& object, const AcquireCall& call, MonoTime now,
    std::vector<int64_t>& slots) {
  // An election is a semaphore of one permit with a value.
  const bool election = call.shape.kind == ObjectKind::kElection;
  const int64_t limit = election ? 1 : call.shape.limit;
  const int64_t permits = election ? 1 : call.shape.permits;
  if (!object.empty() && object.limit != limit) {
    return LimitMismatchError(call.name, object.limit, limit);
  }
  object.limit = limit;
  if (auto it = object.owners.find(call.owner); it != object.owners.end()) {
    Holder& held = it->second;  // re-entry (C5)
    if (held.permits != permits) {
      return PermitsMismatchError(call.name, held.permits, permits);
    }
    ++held.holds;
    held.kept_lease = std::max(held.kept_lease, call.lease);
    held.expires = std::max(held.expires, now + call.lease);
    if (election) object.value = std::string(call.value);  // proclaimed
    slots = held.slots;
    return Attempt{.acquired = Acquired{held.fencing_token, held.holds}};
  }
  const int64_t reserved =
      object.place.has_value() && object.place->owner != call.owner
          ? object.place->permits
          : 0;
  if (object.PermitsUsed() + permits + reserved > limit) {
    // The first waiter keeps a place for its permits (C22): later callers
    // asking fewer cannot starve it. A try keeps none.
    if (call.deadline > now) {
      object.KeepPlaceFor(call.owner, permits,
                          now + WaitingPlaceTtl(fallback_poll_));
    }
    return Attempt{.acquired = std::nullopt,
                   .holder_lease_left = object.SoonestEnd(now)};
  }
  object.DropPlaceOf(call.owner);
  Holder fresh{.fencing_token = ++instance_->last_fencing_token,
               .holds = 1,
               .permits = permits,
               .slots = object.FreeSlots(permits),
               .kept_lease = call.lease,
               .expires = now + call.lease,
               .since = absl::Now()};
  slots = fresh.slots;
  if (election) object.value = std::string(call.value);
  const uint64_t token = fresh.fencing_token;
  object.owners.emplace(std::string(call.owner), std::move(fresh));
  return Attempt{.acquired = Acquired{token, 1}};
}

absl::StatusOr<Attempt> MemoryBackend::TakeRead(Holders& readers,
                                                const AcquireCall& call,
                                                MonoTime now) {
  if (auto it = readers.owners.find(call.owner); it != readers.owners.end()) {
    // A reader re-enters even while a writer waits: refusing would make
    // it wait for itself (C5, C23).
    Holder& held = it->second;
    ++held.holds;
    held.kept_lease = std::max(held.kept_lease, call.lease);
    held.expires = std::max(held.expires, now + call.lease);
    return Attempt{.acquired = Acquired{held.fencing_token, held.holds}};
  }
  const Entry* writer = instance_->Find(Key(call.name), now);
  if (writer != nullptr && writer->owner != call.owner) {
    // Another writer, or a lock kept after its release.
    return Attempt{.acquired = std::nullopt,
                   .holder_lease_left = writer->expires - now};
  }
  if (readers.place.has_value() && readers.place->owner != call.owner) {
    // A writer waits: new readers wait behind it (C23).
    return Attempt{.acquired = std::nullopt,
                   .holder_lease_left = readers.place->until - now};
  }
  // The writer's own read carries the writer's token.
  const uint64_t token = writer != nullptr ? writer->fencing_token
                                           : ++instance_->last_fencing_token;
  readers.owners.emplace(std::string(call.owner),
                         Holder{.fencing_token = token,
                                .holds = 1,
                                .kept_lease = call.lease,
                                .expires = now + call.lease,
                                .since = absl::Now()});
  return Attempt{.acquired = Acquired{token, 1}};
}

void MemoryBackend::GiveUpPlace(const std::string& key,
                                const AcquireCall& call) {
  {
    absl::MutexLock lock(&instance_->mu);
    auto it = instance_->objects.find(key);
    if (it == instance_->objects.end() || !it->second.DropPlaceOf(call.owner)) {
      return;
    }
    if (it->second.empty()) instance_->objects.erase(it);
  }
  releases_.Notify(HubName(call.shape, call.name));
}

absl::StatusOr<int64_t> MemoryBackend::ReleaseHolder(const ReleaseCall& call) {
  const std::string key = ObjectKey(call.shape, call.name);
  int64_t left = 0;
  {
    absl::MutexLock lock(&instance_->mu);
    Holders* object = instance_->FindObject(key, clock_.Now());
    if (object == nullptr) return NotOwnerError(call.name);
    auto it = object->owners.find(call.owner);
    if (it == object->owners.end()) return NotOwnerError(call.name);
    it->second.holds = call.all_holds ? 0 : it->second.holds - call.holds;
    left = std::max<int64_t>(it->second.holds, 0);
    if (left > 0) return left;
    object->owners.erase(it);
    if (object->empty()) instance_->objects.erase(key);
  }
  releases_.Notify(HubName(call.shape, call.name));
  return left;
}

absl::Status MemoryBackend::RenewHolder(const RenewCall& call) {
  absl::MutexLock lock(&instance_->mu);
  const MonoTime now = clock_.Now();
  Holders* object =
      instance_->FindObject(ObjectKey(call.shape, call.name), now);
  if (object == nullptr) return NotOwnerError(call.name);
  auto it = object->owners.find(call.owner);
  if (it == object->owners.end()) return NotOwnerError(call.name);
  Holder& held = it->second;
  held.kept_lease = std::max(held.kept_lease, call.lease);
  held.expires = std::max(held.expires, now + held.kept_lease);
  return absl::OkStatus();
}

absl::Status MemoryBackend::Proclaim(const ProclaimCall& call) {
  const HoldShape shape{.kind = ObjectKind::kElection};
  {
    absl::MutexLock lock(&instance_->mu);
    Holders* election =
        instance_->FindObject(ObjectKey(shape, call.name), clock_.Now());
    if (election == nullptr) return NotOwnerError(call.name);
    auto it = election->owners.find(call.owner);
    if (it == election->owners.end() || it->second.fencing_token != call.term) {
      return NotOwnerError(call.name);
    }
    election->value = std::string(call.value);
  }
  releases_.Notify(HubName(shape, call.name));
  return absl::OkStatus();
}

std::unique_ptr<ObjectWatch> MemoryBackend::WatchObject(
    ObjectKind kind, absl::string_view name) {
  return std::make_unique<HubWatch>(instance_, releases_,
                                    HubName(HoldShape{.kind = kind}, name));
}

ObjectInfo MemoryBackend::DescribeObject(ObjectKind kind,
                                         absl::string_view name, MonoTime now) {
  ObjectInfo info{.kind = kind, .name = std::string(name), .limit = 1};
  if (kind == ObjectKind::kLock) {
    if (const Entry* writer = instance_->Find(Key(name), now)) {
      if (writer->owner.empty()) {
        info.kept_after_release = true;
        info.kept_remaining = writer->expires - now;
      } else {
        info.holders.push_back(
            HolderInfo{.owner = writer->owner,
                       .hold_count = writer->holds,
                       .fencing_token = writer->fencing_token,
                       .remaining_lease = writer->expires - now,
                       .since = writer->since});
      }
    }
    if (Holders* readers =
            instance_->FindObject(ObjectKey(kReaders, name), now)) {
      readers->Describe(now, /*shared=*/true, info);
    }
    return info;
  }
  if (Holders* object = instance_->FindObject(
          ObjectKey(HoldShape{.kind = kind}, name), now)) {
    object->Describe(now, /*shared=*/false, info);
    if (kind == ObjectKind::kSemaphore) info.limit = object->limit;
  } else if (kind == ObjectKind::kSemaphore) {
    info.limit = 0;  // nothing holds or waits: no N in force
  }
  return info;
}

absl::StatusOr<ObjectInfo> MemoryBackend::InspectObject(
    ObjectKind kind, absl::string_view name) {
  absl::MutexLock lock(&instance_->mu);
  return DescribeObject(kind, name, clock_.Now());
}

absl::StatusOr<std::vector<ObjectInfo>> MemoryBackend::ListObjects(
    ObjectKind kind, absl::string_view prefix) {
  absl::MutexLock lock(&instance_->mu);
  const MonoTime now = clock_.Now();
  // A lock is listed for its writer or its readers.
  std::set<std::string> names;
  const std::string marked =
      absl::StrCat(prefix_, Marked(LetterOf(HoldShape{.kind = kind}), ""));
  for (const auto& [key, object] : instance_->objects) {
    if (absl::StartsWith(key, marked)) names.insert(key.substr(marked.size()));
  }
  if (kind == ObjectKind::kLock) {
    for (const auto& [key, entry] : instance_->locks) {
      if (absl::StartsWith(key, prefix_)) {
        names.insert(key.substr(prefix_.size()));
      }
    }
  }
  std::vector<ObjectInfo> out;
  for (const std::string& name : names) {
    if (!absl::StartsWith(name, prefix)) continue;
    ObjectInfo info = DescribeObject(kind, name, now);
    if (ListsAsHeld(info)) out.push_back(std::move(info));
  }
  return out;
}

absl::Status MemoryBackend::ForceUnlockObject(
    ObjectKind kind, absl::string_view name,
    std::optional<uint64_t> fencing_token) {
  if (kind == ObjectKind::kLock && !fencing_token.has_value()) {
    return ForceUnlock(name);
  }
  if (kind == ObjectKind::kLock &&
      ForceUnlockIfToken(name, *fencing_token).ok()) {
    return absl::OkStatus();  // the writer's
  }
  const HoldShape shape{.kind = kind,
                        .mode = kind == ObjectKind::kLock
                                    ? HoldMode::kShared
                                    : HoldMode::kExclusive};
  const std::string key = ObjectKey(shape, name);
  {
    absl::MutexLock lock(&instance_->mu);
    Holders* object = instance_->FindObject(key, clock_.Now());
    if (!fencing_token.has_value()) {
      instance_->objects.erase(key);
    } else {
      if (object == nullptr) return TokenMismatchError(name, *fencing_token);
      auto it = std::find_if(object->owners.begin(), object->owners.end(),
                             [&](const auto& h) {
                               return h.second.fencing_token == *fencing_token;
                             });
      if (it == object->owners.end()) {
        return TokenMismatchError(name, *fencing_token);
      }
      object->owners.erase(it);
      if (object->empty()) instance_->objects.erase(key);
    }
  }
  releases_.Notify(HubName(shape, name));
  return absl::OkStatus();
}

}  // namespace dlock::memory
