// memory://[name]: the reference implementation of the contract, in process.
// Every client in the process that names the same instance shares its locks,
// as clients of one server would; the process clock is the backend's clock.
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"

namespace dlock {
namespace {

// A lock released with keep_for (ReleaseCall) stays an Entry with an empty
// owner, which no owner id matches, and no holds, until it expires.
struct Entry {
  std::string owner;
  int64_t holds = 0;
  uint64_t fencing_token = 0;
  absl::Duration kept_lease;  // the largest lease asked for this hold (C5)
  MonoTime expires;           // on the clients' shared clock
  absl::Time since;           // a date, for introspection only
};

// One instance: the state a server would hold.
class MemoryInstance {
 public:
  // `clock` null: Clock::Real().
  explicit MemoryInstance(std::shared_ptr<Clock> clock)
      : clock_owner(std::move(clock)),
        clock(clock_owner != nullptr ? *clock_owner : Clock::Real()) {}
  const std::shared_ptr<Clock> clock_owner;
  const Clock& clock;  // the "server's" clock
  absl::Mutex mu;
  // Keyed by namespace + '\0' + name: a namespace has no NUL (C16). The key
  // stays in here: messages name the lock as its caller did.
  absl::flat_hash_map<std::string, Entry> locks ABSL_GUARDED_BY(mu);
  uint64_t last_fencing_token ABSL_GUARDED_BY(mu) = 0;

  // Waiters for releases in namespace `ns`, by lock name; kept as long as
  // the instance.
  WakeupHub& ReleasesIn(const std::string& ns) {
    absl::MutexLock lock(&hubs_mu_);
    std::unique_ptr<WakeupHub>& hub = hubs_[ns];
    if (hub == nullptr) hub = std::make_unique<WakeupHub>(clock);
    return *hub;
  }

  // The live entry for `key`, dropping it if its lease ran out (C2).
  Entry* Find(const std::string& key, MonoTime now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = locks.find(key);
    if (it == locks.end()) return nullptr;
    if (it->second.expires <= now) {
      locks.erase(it);
      return nullptr;
    }
    return &it->second;
  }

 private:
  absl::Mutex hubs_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<WakeupHub>> hubs_
      ABSL_GUARDED_BY(hubs_mu_);
};

// The instance called `name`, kept for the life of the process as a server
// would keep its state (its fencing counter never goes back, C8). Its
// expiries count on the clock of the client that made it: clients that share
// an instance share a clock (ClientOptions::clock), as clients of one server
// share the server's.
absl::StatusOr<std::shared_ptr<MemoryInstance>> InstanceNamed(
    const std::string& name, const std::shared_ptr<Clock>& clock) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* instances =
      new std::map<std::string, std::shared_ptr<MemoryInstance>>;
  absl::MutexLock lock(&mu);
  std::shared_ptr<MemoryInstance>& instance = (*instances)[name];
  if (instance == nullptr) {
    instance = std::make_shared<MemoryInstance>(clock);
  } else if (instance->clock_owner != clock) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory://", name,
        " is in use by clients with another ClientOptions::clock; clients "
        "of one instance share one clock"));
  }
  return instance;
}

class MemoryBackend : public Backend {
 public:
  MemoryBackend(std::shared_ptr<MemoryInstance> instance, std::string ns,
                absl::Duration fallback_poll)
      : clock_(instance->clock),
        instance_(std::move(instance)),
        releases_(instance_->ReleasesIn(ns)),
        prefix_(absl::StrCat(ns, absl::string_view("\0", 1))),
        fallback_poll_(fallback_poll) {}

  BackendTraits Traits() const override {
    return BackendTraits{.fencing = FencingStrength::kProcess,
                         .can_list = true,
                         .shared_across_processes = false,
                         .keeps_after_release = true};
  }
  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override {
    const std::string key = Key(call.name);
    return AcquireWithWakeups(
        call, releases_, fallback_poll_,
        [&]() -> absl::StatusOr<Attempt> { return TryOnce(key, call); });
  }

  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override {
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

  absl::Status Renew(const RenewCall& call) override {
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

  absl::StatusOr<LockInfo> Inspect(absl::string_view name) override {
    absl::MutexLock lock(&instance_->mu);
    const MonoTime now = clock_.Now();
    LockInfo info;
    info.name = std::string(name);
    if (const Entry* entry = instance_->Find(Key(name), now)) {
      Describe(*entry, now, info);
    }
    return info;
  }

  absl::StatusOr<std::vector<LockInfo>> List(
      absl::string_view prefix) override {
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

  absl::Status ForceUnlock(absl::string_view name) override {
    const std::string key = Key(name);
    {
      absl::MutexLock lock(&instance_->mu);
      instance_->locks.erase(key);
    }
    releases_.Notify(name);
    return absl::OkStatus();
  }

  absl::Status ForceUnlockIfToken(absl::string_view name,
                                  uint64_t fencing_token) override {
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

  void Shutdown() override {}

 private:
  std::string Key(absl::string_view name) const {
    return absl::StrCat(prefix_, name);
  }

  static void Describe(const Entry& entry, MonoTime now, LockInfo& info) {
    info.locked = true;
    info.owner = entry.owner;
    info.hold_count = entry.holds;
    info.fencing_token = entry.fencing_token;
    info.remaining_lease = entry.expires - now;
    info.since = entry.since;
    info.kept_after_release = entry.owner.empty();
  }

  absl::StatusOr<Attempt> TryOnce(const std::string& key,
                                  const AcquireCall& call) {
    absl::MutexLock lock(&instance_->mu);
    const MonoTime now = clock_.Now();
    Entry* entry = instance_->Find(key, now);
    if (entry == nullptr) {
      Entry& fresh = instance_->locks[key];
      fresh.owner = std::string(call.owner);
      fresh.holds = 1;
      fresh.fencing_token = ++instance_->last_fencing_token;
      fresh.kept_lease = call.lease;
      fresh.expires = now + call.lease;
      fresh.since = absl::Now();
      return Attempt{.acquired = Acquired{fresh.fencing_token, 1}};
    }
    if (entry->owner == call.owner) {
      entry->holds += 1;
      entry->kept_lease = std::max(entry->kept_lease, call.lease);
      entry->expires = std::max(entry->expires, now + call.lease);
      return Attempt{.acquired = Acquired{entry->fencing_token, entry->holds}};
    }
    return Attempt{.acquired = std::nullopt,
                   .holder_lease_left = entry->expires - now};
  }

  const Clock& clock_;
  const std::shared_ptr<MemoryInstance> instance_;
  WakeupHub& releases_;  // of this namespace, owned by instance_
  const std::string prefix_;
  const absl::Duration fallback_poll_;
};

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
}  // namespace dlock
