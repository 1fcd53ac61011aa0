// The backend registry and dlock::Connect(): URI to client.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "client_core.h"
#include "dlock/backend/backend.h"
#include "dlock/client.h"
#include "identity.h"
#include "primitives.h"

namespace dlock {
namespace {

struct Registry {
  absl::Mutex mu;
  std::map<std::string, BackendFactory> factories ABSL_GUARDED_BY(mu);
  // name -> version (RegisterClientLibrary)
  std::map<std::string, std::string> client_libraries ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* registry = new Registry;  // never destroyed: used at exit
  return *registry;
}

// A DistributedLock is a name bound to the client core it acts through.
class LockHandle : public DistributedLock {
 public:
  LockHandle(std::shared_ptr<internal::ClientCore> core, std::string name)
      : core_(std::move(core)), name_(std::move(name)) {}

  const std::string& name() const override { return name_; }
  absl::StatusOr<Hold> Acquire(const AcquireOptions& options) override {
    return core_->Acquire(name_, options);
  }

 private:
  const std::shared_ptr<internal::ClientCore> core_;
  const std::string name_;
};

class AdminHandle : public LockAdmin {
 public:
  explicit AdminHandle(std::shared_ptr<internal::ClientCore> core)
      : core_(std::move(core)) {}

  absl::StatusOr<LockInfo> Inspect(absl::string_view name) override {
    if (absl::Status s = internal::ValidateLockName(name); !s.ok()) return s;
    return core_->Inspect(name);
  }
  absl::StatusOr<std::vector<LockInfo>> List(
      absl::string_view prefix) override {
    return core_->List(prefix);
  }
  absl::Status ForceUnlock(absl::string_view name) override {
    if (absl::Status s = internal::ValidateLockName(name); !s.ok()) return s;
    return core_->ForceUnlock(name);
  }
  absl::Status ForceUnlock(absl::string_view name,
                           uint64_t fencing_token) override {
    if (absl::Status s = internal::ValidateLockName(name); !s.ok()) return s;
    return core_->ForceUnlock(name, fencing_token);
  }
  absl::StatusOr<ServerMemory> ServerMemoryUse() override {
    return core_->ServerMemoryUse();
  }
  absl::StatusOr<std::vector<ObjectInfo>> ListObjects(
      ObjectKind kind, absl::string_view prefix) override {
    if (absl::Status s = core_->CheckOffered(kind, false); !s.ok()) return s;
    return core_->ListObjects(kind, prefix);
  }
  absl::Status ForceUnlockObject(
      ObjectKind kind, absl::string_view name,
      std::optional<uint64_t> fencing_token) override {
    if (absl::Status s = internal::ValidateLockName(name); !s.ok()) return s;
    if (absl::Status s = core_->CheckOffered(kind, false); !s.ok()) return s;
    return core_->ForceUnlockObject(kind, name, fencing_token);
  }

 private:
  const std::shared_ptr<internal::ClientCore> core_;
};

class OwnerTokenHandle : public OwnerTokenCalls {
 public:
  explicit OwnerTokenHandle(std::shared_ptr<internal::ClientCore> core)
      : core_(std::move(core)) {}

  absl::Status Release(absl::string_view name,
                       absl::string_view owner_token) override {
    if (absl::Status s = internal::ValidateLockName(name); !s.ok()) return s;
    return core_->ReleaseByToken(name, owner_token);
  }
  absl::Status Renew(absl::string_view name, absl::string_view owner_token,
                     std::optional<absl::Duration> lease) override {
    if (absl::Status s = internal::ValidateLockName(name); !s.ok()) return s;
    return core_->RenewByToken(name, owner_token, lease);
  }
  LockState State(absl::string_view name,
                  absl::string_view owner_token) override {
    if (!internal::ValidateLockName(name).ok()) return LockState::kNotHeld;
    return core_->StateByToken(name, owner_token);
  }

 private:
  const std::shared_ptr<internal::ClientCore> core_;
};

class Client : public LockClient {
 public:
  explicit Client(std::shared_ptr<internal::ClientCore> core)
      : core_(core), admin_(core), tokens_(std::move(core)) {}
  ~Client() override { core_->Close().IgnoreError(); }

  absl::StatusOr<std::unique_ptr<DistributedLock>> GetLock(
      absl::string_view name) override {
    if (absl::Status s = internal::ValidateLockName(name); !s.ok()) return s;
    return std::make_unique<LockHandle>(core_, std::string(name));
  }
  LockAdmin& Admin() override { return admin_; }
  OwnerTokenCalls& OwnerTokens() override { return tokens_; }
  absl::Status Close() override { return core_->Close(); }
  const std::string& client_id() const override { return core_->client_id(); }
  const std::string& lock_namespace() const override {
    return core_->lock_namespace();
  }
  const BackendTraits& traits() const override { return core_->traits(); }
  const std::string& endpoint() const override { return core_->endpoint(); }
  std::string CurrentOwner() const override { return core_->CurrentOwner(); }

  absl::StatusOr<std::unique_ptr<Semaphore>> GetSemaphore(
      absl::string_view name, int64_t permits) override {
    if (absl::Status s = internal::ValidateLockName(name); !s.ok()) return s;
    if (permits < 1 || permits > kMaxSemaphorePermits) {
      return absl::InvalidArgumentError(
          absl::StrCat("semaphore '", name, "': N must be from 1 to ",
                       kMaxSemaphorePermits, ", not ", permits));
    }
    if (absl::Status s = core_->CheckOffered(ObjectKind::kSemaphore, false);
        !s.ok()) {
      return s;
    }
    return internal::MakeSemaphore(core_, std::string(name), permits);
  }
  absl::StatusOr<std::unique_ptr<ReadWriteLock>> GetReadWriteLock(
      absl::string_view name) override {
    if (absl::Status s = internal::ValidateLockName(name); !s.ok()) return s;
    if (absl::Status s = core_->CheckOffered(ObjectKind::kLock, true);
        !s.ok()) {
      return s;
    }
    return internal::MakeReadWriteLock(core_, std::string(name));
  }
  absl::StatusOr<std::unique_ptr<Election>> GetElection(
      absl::string_view name) override {
    if (absl::Status s = internal::ValidateLockName(name); !s.ok()) return s;
    if (absl::Status s = core_->CheckOffered(ObjectKind::kElection, false);
        !s.ok()) {
      return s;
    }
    return internal::MakeElection(core_, std::string(name));
  }
  absl::StatusOr<MultiHold> AcquireAll(absl::Span<const std::string> names,
                                       const AcquireOptions& options) override {
    if (absl::Status s = ValidateNames(names); !s.ok()) return s;
    return internal::AcquireAll(*core_, names, options);
  }

 private:
  // AcquireAll()'s names: some, not too many, each valid, none twice.
  static absl::Status ValidateNames(absl::Span<const std::string> names) {
    if (names.empty() || names.size() > kMaxMultiLockNames) {
      return absl::InvalidArgumentError(
          absl::StrCat("AcquireAll takes from 1 to ", kMaxMultiLockNames,
                       " lock names, not ", names.size()));
    }
    std::set<absl::string_view> seen;
    for (const std::string& name : names) {
      if (absl::Status s = internal::ValidateLockName(name); !s.ok()) return s;
      if (!seen.insert(name).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "AcquireAll names lock '", name, "' twice: name each once"));
      }
    }
    return absl::OkStatus();
  }

  const std::shared_ptr<internal::ClientCore> core_;
  AdminHandle admin_;
  OwnerTokenHandle tokens_;
};

absl::Status ValidateOptions(const ClientOptions& options) {
  if (options.watchdog_lease < kMinWatchdogLease ||
      options.watchdog_lease > kLongestLease) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ClientOptions::watchdog_lease must be ",
        DurationRangeText({.min = kMinWatchdogLease, .max = kLongestLease})));
  }
  if (options.fallback_poll <= absl::ZeroDuration() ||
      options.fallback_poll == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "ClientOptions::fallback_poll must be positive and finite");
  }
  if (options.liveness_ttl < absl::Milliseconds(10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ClientOptions::liveness_ttl must be at least 10ms (or "
                     "InfiniteDuration for no liveness record), not ",
                     absl::FormatDuration(options.liveness_ttl)));
  }
  if (options.close_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "ClientOptions::close_timeout must not be negative");
  }
  return absl::OkStatus();
}

}  // namespace

bool RegisterBackend(absl::string_view scheme, BackendFactory factory) {
  Registry& registry = GetRegistry();
  absl::MutexLock lock(&registry.mu);
  registry.factories[std::string(scheme)] = std::move(factory);
  return true;
}

bool RegisterClientLibrary(absl::string_view name, absl::string_view version) {
  Registry& registry = GetRegistry();
  absl::MutexLock lock(&registry.mu);
  registry.client_libraries[std::string(name)] = std::string(version);
  return true;
}

std::vector<std::string> ClientLibraryVersions() {
  Registry& registry = GetRegistry();
  absl::MutexLock lock(&registry.mu);
  std::vector<std::string> out;
  for (const auto& [name, version] : registry.client_libraries) {
    out.push_back(absl::StrCat(name, " ", version));
  }
  return out;
}

std::vector<std::string> RegisteredSchemes() {
  Registry& registry = GetRegistry();
  absl::MutexLock lock(&registry.mu);
  std::vector<std::string> schemes;
  for (const auto& [scheme, factory] : registry.factories) {
    schemes.push_back(scheme);
  }
  return schemes;
}

namespace {

absl::StatusOr<BackendFactory> FactoryFor(absl::string_view scheme) {
  Registry& registry = GetRegistry();
  absl::MutexLock lock(&registry.mu);
  auto it = registry.factories.find(std::string(scheme));
  if (it != registry.factories.end()) return it->second;
  std::vector<std::string> known;
  for (const auto& [name, f] : registry.factories) known.push_back(name);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown backend scheme '", scheme, "://'; this build has: ",
      known.empty() ? "none (link dlock::dlock or a backend target)"
                    : absl::StrJoin(known, ", ")));
}

// The namespace: ClientOptions', or the URI's namespace=, else "default".
absl::StatusOr<std::string> NamespaceOf(const ClientOptions& options,
                                        UriParams& params) {
  std::string lock_namespace = options.lock_namespace;
  if (std::optional<std::string> from_uri = params.TakeString("namespace")) {
    if (!lock_namespace.empty() && lock_namespace != *from_uri) {
      return absl::InvalidArgumentError(
          absl::StrCat("namespace '", *from_uri, "' in the URI differs from '",
                       lock_namespace, "' in ClientOptions; give one"));
    }
    lock_namespace = *from_uri;
  }
  if (lock_namespace.empty()) lock_namespace = "default";
  if (absl::Status s = internal::ValidateNamespace(lock_namespace); !s.ok()) {
    return s;
  }
  return lock_namespace;
}

// The backend the factory makes, wrapped as the options ask.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(
    const BackendFactory& factory, const BackendConfig& config,
    const ClientOptions& options, const internal::ClientCore& core) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = factory(config);
  if (!backend.ok()) return backend.status();
  std::unique_ptr<Backend> used = *std::move(backend);
  if (options.backend_decorator) {
    used = options.backend_decorator(std::move(used));
    if (used == nullptr) {
      return absl::InvalidArgumentError(
          "ClientOptions::backend_decorator returned no backend");
    }
  }
  if (options.observer != nullptr) {
    // Outermost, so that the time is what the core waits, decorators
    // included.
    used = std::make_unique<internal::TimedBackend>(
        std::move(used), core.observer(), core.clock());
  }
  return used;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LockClient>> Connect(
    absl::string_view uri_text, const ClientOptions& options) {
  absl::StatusOr<Uri> uri = ParseUri(uri_text);
  if (!uri.ok()) return uri.status();
  absl::StatusOr<BackendFactory> factory = FactoryFor(uri->scheme);
  if (!factory.ok()) return factory.status();
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;

  UriParams params(*uri);
  absl::StatusOr<std::string> lock_namespace = NamespaceOf(options, params);
  if (!lock_namespace.ok()) return lock_namespace.status();
  std::string client_id = options.client_id.empty() ? internal::RandomClientId()
                                                    : options.client_id;
  if (absl::Status s = internal::ValidateClientId(client_id); !s.ok()) return s;
  absl::StatusOr<CommonBackendOptions> common = TakeCommonOptions(params);
  if (!common.ok()) return common.status();
  params.EndCommonOptions();  // the rest are the scheme's own
  // The URI's liveness_ttl= wins: the same code can run with another TTL
  // by configuration alone.
  ClientOptions effective = options;
  if (common->liveness_ttl.has_value()) {
    effective.liveness_ttl = *common->liveness_ttl;
  }
  if (absl::Status s = ValidateOptions(effective); !s.ok()) return s;

  auto core = std::make_shared<internal::ClientCore>(
      effective, *lock_namespace, client_id, uri->Redacted());
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(
      *factory,
      BackendConfig{.uri = *uri,
                    .params = params,
                    .options = effective,
                    .lock_namespace = *lock_namespace,
                    .client_id = client_id,
                    .endpoint = core->endpoint(),
                    .listener = core.get(),
                    .clock = core->clock(),
                    .common = *common,
                    .liveness_id = absl::StrCat(
                        client_id, "-",
                        absl::Hex(internal::RandomBits(), absl::kZeroPad16))},
      effective, *core);
  if (!backend.ok()) return backend.status();
  core->Start(*std::move(backend));
  return std::make_unique<Client>(std::move(core));
}

}  // namespace dlock
