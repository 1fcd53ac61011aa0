// Copyright dlock authors. The backend-independent half of every client: the
// local hold table, the watchdog (C7), lost notifications and shutdown (C13).
#ifndef DLOCK_CORE_SRC_CLIENT_CORE_H_
#define DLOCK_CORE_SRC_CLIENT_CORE_H_

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "dlock/backend.h"
#include "dlock/client.h"

namespace dlock::internal {

class ClientCore : public BackendListener,
                   public std::enable_shared_from_this<ClientCore> {
 public:
  ClientCore(ClientOptions options, std::string lock_namespace,
             std::string client_id, std::string endpoint);
  ~ClientCore() override;

  // Takes the backend and starts the watchdog; called once.
  void Start(std::unique_ptr<Backend> backend);

  absl::StatusOr<Acquired> Acquire(absl::string_view name,
                                   const AcquireOptions& options);
  absl::Status Release(absl::string_view name, absl::string_view owner_token);
  absl::Status Renew(absl::string_view name,
                     std::optional<absl::Duration> lease,
                     absl::string_view owner_token);
  absl::StatusOr<LockInfo> Inspect(absl::string_view name);
  absl::StatusOr<bool> IsHeldByMe(absl::string_view name,
                                  absl::string_view owner_token);
  absl::Status ForceUnlock(absl::string_view name);
  LockState State(absl::string_view name, absl::string_view owner_token);
  absl::StatusOr<uint64_t> FencingToken(absl::string_view name,
                                        absl::string_view owner_token);
  absl::StatusOr<std::vector<LockInfo>> List(absl::string_view prefix);
  absl::Status Close();

  void OnHoldLost(absl::string_view name, absl::string_view owner,
                  const absl::Status& reason) override;

  const std::string& client_id() const { return client_id_; }
  const std::string& lock_namespace() const { return lock_namespace_; }
  const std::string& endpoint() const { return endpoint_; }
  std::string CurrentOwner() const;

 private:
  using HoldKey = std::pair<std::string, std::string>;  // name, owner

  struct Hold {
    uint64_t generation = 0;  // tells a renewal's hold from a later one
    uint64_t fencing_token = 0;
    int64_t local_holds = 0;  // holds taken through this client
    absl::Duration lease;
    bool renewed = false;  // by the watchdog
    bool lost = false;
    absl::Status lost_reason;
    absl::Time expires_locally;  // send time of the last grant + lease
    absl::Time next_renewal;
    LockLostCallback on_lost;
  };

  struct Delivery {
    LockLostEvent event;
    LockLostCallback hold_callback;
  };

  absl::StatusOr<std::string> ResolveOwner(absl::string_view owner_token) const;
  absl::Status CheckOpen() const;
  // Marks a hold lost and queues its notification; call Deliver() unlocked.
  void MarkLost(const HoldKey& key, Hold& hold, absl::Status reason,
                std::vector<Delivery>& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Deliver(std::vector<Delivery>& deliveries);
  void WatchdogLoop();
  void RenewDue(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks explicit-lease holds whose lease ran out as lost.
  void ExpireUnrenewed(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ClientOptions options_;
  const std::string lock_namespace_;
  const std::string client_id_;
  const std::string endpoint_;
  std::unique_ptr<Backend> backend_;
  CancelToken closing_;

  // Held shared by every call into the backend, exclusively by Close() around
  // Backend::Shutdown(), so that no call runs on a shut-down backend.
  absl::Mutex ops_mu_;
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<HoldKey, Hold> holds_ ABSL_GUARDED_BY(mu_);
  // Losses reported by the backend, delivered by the watchdog's thread.
  std::vector<Delivery> queued_deliveries_ ABSL_GUARDED_BY(mu_);
  absl::CondVar watchdog_wake_;
  std::thread watchdog_;
};

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_CLIENT_CORE_H_
