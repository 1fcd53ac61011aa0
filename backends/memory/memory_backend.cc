// memory://: locks' writers, the factory, and what every kind shares.
#include "memory_backend.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/backend/rules.h"

namespace dlock::memory {
namespace {

constexpr HoldShape kReaders{.kind = ObjectKind::kLock,
                             .mode = HoldMode::kShared};

}  // namespace

MemoryBackend::MemoryBackend(std::shared_ptr<MemoryInstance> instance,
                             std::string ns, absl::Duration fallback_poll)
    : clock_(instance->clock),
      instance_(std::move(instance)),
      releases_(instance_->ReleasesIn(ns)),
      prefix_(absl::StrCat(ns, absl::string_view("\0", 1))),
      fallback_poll_(fallback_poll) {}

BackendTraits MemoryBackend::Traits() const {
  return BackendTraits{.fencing = FencingStrength::kProcess,
                       .can_list = true,
                       .shared_across_processes = false,
                       .keeps_after_release = true,
                       .semaphores = true,
                       .read_write_locks = true,
                       .elections = true,
                       .semaphore_order = WaiterOrder::kHeadReserved,
                       .multi_lock = MultiLockMode::kAtomic};
}

absl::StatusOr<Grant> MemoryBackend::Acquire(const AcquireCall& call) {
  if (!call.shape.IsLockWriter()) return AcquireShaped(call);
  const std::string key = Key(call.name);
  absl::StatusOr<Grant> grant = AcquireWithWakeups(
      call, releases_, fallback_poll_,
      [&]() -> absl::StatusOr<Attempt> { return TryLockOnce(key, call); });
  // A writer that gives up takes its intent with it (C9, C23).
  if (!grant.ok()) GiveUpPlace(ObjectKey(kReaders, call.name), call);
  return grant;
}

absl::StatusOr<int64_t> MemoryBackend::Release(const ReleaseCall& call) {
  if (!call.shape.IsLockWriter()) return ReleaseHolder(call);
  return ReleaseLock(call);
}

absl::Status MemoryBackend::Renew(const RenewCall& call) {
  if (!call.shape.IsLockWriter()) return RenewHolder(call);
  return RenewLock(call);
}

absl::StatusOr<int64_t> MemoryBackend::ReleaseLock(const ReleaseCall& call) {
  const absl::string_view name = call.name;
  const absl::string_view owner = call.owner;
  const std::string key = Key(name);
  int64_t left = 0;
  {
    absl::MutexLock lock(&instance_->mu);
    Entry* entry = instance_->Find(key, clock_.Now());
    if (entry == nullptr || entry->owner != owner) return NotOwnerError(name);
    entry->holds = call.all_holds ? 0 : entry->holds - call.holds;
    left = std::max<int64_t>(entry->holds, 0);
    if (left == 0 && call.keep_for > absl::ZeroDuration()) {
      // Kept: nobody's, expiring by itself. Waiters are woken all the
      // same, to look again and sleep until its expiry.
      entry->owner.clear();
      entry->holds = 0;
      entry->expires = clock_.Now() + call.keep_for;
    } else if (left == 0) {
      instance_->locks.erase(key);
    }
  }
  if (left == 0) releases_.Notify(name);
  return left;
}

absl::Status MemoryBackend::RenewLock(const RenewCall& call) {
  absl::MutexLock lock(&instance_->mu);
  const MonoTime now = clock_.Now();
  Entry* entry = instance_->Find(Key(call.name), now);
  if (entry == nullptr || entry->owner != call.owner) {
    return NotOwnerError(call.name);
  }
  entry->kept_lease = std::max(entry->kept_lease, call.lease);
  entry->expires = std::max(entry->expires, now + entry->kept_lease);
  return absl::OkStatus();
}

absl::StatusOr<LockInfo> MemoryBackend::Inspect(absl::string_view name) {
  absl::MutexLock lock(&instance_->mu);
  const MonoTime now = clock_.Now();
  LockInfo info;
  info.name = std::string(name);
  if (const Entry* entry = instance_->Find(Key(name), now)) {
    Describe(*entry, now, info);
  }
  return info;
}

absl::StatusOr<std::vector<LockInfo>> MemoryBackend::List(
    absl::string_view prefix) {
  absl::MutexLock lock(&instance_->mu);
  const MonoTime now = clock_.Now();
  std::vector<LockInfo> out;
  for (const auto& [key, entry] : instance_->locks) {
    if (!absl::StartsWith(key, prefix_) || entry.expires <= now) continue;
    absl::string_view name = absl::string_view(key).substr(prefix_.size());
    if (!absl::StartsWith(name, prefix)) continue;
    LockInfo info;
    info.name = std::string(name);
    Describe(entry, now, info);
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const LockInfo& a, const LockInfo& b) {
    return a.name < b.name;
  });
  return out;
}

absl::Status MemoryBackend::ForceUnlock(absl::string_view name) {
  {
    absl::MutexLock lock(&instance_->mu);
    instance_->locks.erase(Key(name));
    // Its readers go with it (C12 for a lock's every holder).
    instance_->objects.erase(ObjectKey(kReaders, name));
  }
  releases_.Notify(name);
  return absl::OkStatus();
}

absl::Status MemoryBackend::ForceUnlockIfToken(absl::string_view name,
                                               uint64_t fencing_token) {
  const std::string key = Key(name);
  {
    absl::MutexLock lock(&instance_->mu);
    const Entry* entry = instance_->Find(key, clock_.Now());
    if (entry == nullptr || entry->fencing_token != fencing_token) {
      return TokenMismatchError(name, fencing_token);
    }
    instance_->locks.erase(key);
  }
  releases_.Notify(name);
  return absl::OkStatus();
}

std::string MemoryBackend::Key(absl::string_view name) const {
  return absl::StrCat(prefix_, name);
}

void MemoryBackend::Describe(const Entry& entry, MonoTime now, LockInfo& info) {
  info.locked = true;
  info.owner = entry.owner;
  info.hold_count = entry.holds;
  info.fencing_token = entry.fencing_token;
  info.remaining_lease = entry.expires - now;
  info.since = entry.since;
  info.kept_after_release = entry.owner.empty();
}

absl::StatusOr<Attempt> MemoryBackend::TryLockOnce(const std::string& key,
                                                   const AcquireCall& call) {
  absl::MutexLock lock(&instance_->mu);
  const MonoTime now = clock_.Now();
  if (std::optional<absl::StatusOr<Attempt>> refused =
          Refusal(key, call, now)) {
    return *std::move(refused);
  }
  return Attempt{.acquired = TakeLock(key, call, now)};
}

std::optional<absl::StatusOr<Attempt>> MemoryBackend::Refusal(
    const std::string& key, const AcquireCall& call, MonoTime now) {
  const Entry* entry = instance_->Find(key, now);
  if (entry != nullptr && entry->owner == call.owner) return std::nullopt;
  if (std::optional<absl::StatusOr<Attempt>> met = MeetReaders(call, now)) {
    return met;
  }
  if (entry == nullptr) return std::nullopt;
  return absl::StatusOr<Attempt>(Attempt{
      .acquired = std::nullopt, .holder_lease_left = entry->expires - now});
}

Acquired MemoryBackend::TakeLock(const std::string& key,
                                 const AcquireCall& call, MonoTime now) {
  if (Entry* entry = instance_->Find(key, now)) {  // the owner's: re-entry
    entry->holds += 1;
    entry->kept_lease = std::max(entry->kept_lease, call.lease);
    entry->expires = std::max(entry->expires, now + call.lease);
    return Acquired{entry->fencing_token, entry->holds};
  }
  Entry& fresh = instance_->locks[key];
  fresh.owner = std::string(call.owner);
  fresh.holds = 1;
  fresh.fencing_token = ++instance_->last_fencing_token;
  fresh.kept_lease = call.lease;
  fresh.expires = now + call.lease;
  fresh.since = absl::Now();
  return Acquired{fresh.fencing_token, 1};
}

std::optional<absl::StatusOr<Attempt>> MemoryBackend::MeetReaders(
    const AcquireCall& call, MonoTime now) {
  const std::string key = ObjectKey(kReaders, call.name);
  Holders* readers = instance_->FindObject(key, now);
  if (readers == nullptr) return std::nullopt;
  if (readers->owners.contains(call.owner)) {
    // Waiting would wait for itself (C23).
    return absl::StatusOr<Attempt>(UpgradeRefusedError(call.name));
  }
  const bool another_intent =
      readers->place.has_value() && readers->place->owner != call.owner;
  if (readers->owners.empty() && !another_intent) {
    // The readers it waited for are gone: its intent ends with the grant
    // that follows, or the other writer's hold it meets.
    readers->DropPlaceOf(call.owner);
    if (readers->empty()) instance_->objects.erase(key);
    return std::nullopt;
  }
  // New readers wait behind the first writer that waits (its intent); the
  // last reader's release announces itself, and the intent's writer comes
  // in before any other (C23).
  if (!readers->owners.empty() && call.deadline > now) {
    readers->KeepPlaceFor(call.owner, 1, now + WaitingPlaceTtl(fallback_poll_));
  }
  return absl::StatusOr<Attempt>(Attempt{
      .acquired = std::nullopt, .holder_lease_left = readers->SoonestEnd(now)});
}

namespace {

absl::StatusOr<std::unique_ptr<Backend>> MakeMemoryBackend(
    const BackendConfig& config) {
  // connect_timeout and operation_timeout (config.common) have nothing to
  // bound here: every call is answered in process.
  if (absl::Status s = config.params.RejectUnknown("memory"); !s.ok()) {
    return s;
  }
  if (config.uri.hosts.size() > 1 || !config.uri.path.empty() ||
      !config.uri.user.empty() || config.uri.password.has_value() ||
      (!config.uri.hosts.empty() && config.uri.hosts[0].port.has_value())) {
    return absl::InvalidArgumentError(
        "a memory URI is memory://[instance-name][?namespace=...]");
  }
  std::string name = config.uri.hosts.empty() ? "" : config.uri.hosts[0].host;
  absl::StatusOr<std::shared_ptr<MemoryInstance>> instance =
      InstanceNamed(name, config.options.clock);
  if (!instance.ok()) return instance.status();
  return std::make_unique<MemoryBackend>(*std::move(instance),
                                         config.lock_namespace,
                                         config.options.fallback_poll);
}

const bool kRegistered = RegisterBackend("memory", &MakeMemoryBackend);

}  // namespace
}  // namespace dlock::memory
