// Copyright dlock authors. Redis Sentinel, as a client needs it: where the
// master is now, and news that it moved.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_SENTINEL_H_
#define DLOCK_BACKENDS_REDIS_REDIS_SENTINEL_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "redis_connection.h"
#include "redis_subscriber.h"

namespace dlock::redis {

// The address in a Sentinel's answer to SENTINEL get-master-addr-by-name
// ([host, port]); nullopt for any other answer.
std::optional<Address> MasterAddressOf(const redisReply* reply);

class SentinelWatch {
 public:
  // `sentinels` are the Sentinels' addresses and timeouts (no db, no
  // password: Sentinels here take none).
  SentinelWatch(std::vector<ConnectionConfig> sentinels,
                std::string master_name);
  ~SentinelWatch();

  // The master's address as the first Sentinel that answers names it,
  // starting with the one that answered last. Unavailable naming every
  // Sentinel when none does. Thread-safe.
  absl::StatusOr<Address> Locate(int cancel_fd);

  // Follows +switch-master on one Sentinel (the next one when it drops),
  // calling `moved` on its thread when the master moved or news may have
  // been missed.
  void Start(std::function<void()> moved);
  void Stop();

  // "master 'name' via Sentinels h1:p1,h2:p2", for messages.
  std::string Describe() const;

 private:
  const std::vector<ConnectionConfig> sentinels_;
  const std::string master_name_;
  std::atomic<size_t> preferred_{0};  // the Sentinel that answered last
  std::unique_ptr<Subscriber> switches_;
};

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_SENTINEL_H_
