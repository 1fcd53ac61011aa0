// Copyright dlock authors. Sharded pub/sub (SSUBSCRIBE, Redis 7.0) on one
// cluster master: the shard channels of the slots this client waits on
// there, subscribed on demand, each message handed to a callback. A
// release is announced on its lock's slot (Keyspace::ShardChannel), which
// only that slot's shard carries: no broadcast over the cluster bus.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_SHARD_SUBSCRIBER_H_
#define DLOCK_BACKENDS_REDIS_REDIS_SHARD_SUBSCRIBER_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "redis_connection.h"

namespace dlock::redis {

class ShardSubscriber {
 public:
  // Called on the subscriber's thread.
  struct Callbacks {
    std::function<void(absl::string_view message)> on_message;
    // Subscriptions were lost (the connection dropped, or the node gave a
    // slot away and unsubscribed its channels): announcements may have
    // been missed, and waiters must subscribe again where the slot is now.
    std::function<void()> on_gap;
    // The node answered that a slot is not its own (MOVED), or gave one
    // away: the slot map is out of date.
    std::function<void()> on_moved;
  };
  ShardSubscriber(ConnectionConfig config, Callbacks callbacks);
  ~ShardSubscriber();
  ShardSubscriber(const ShardSubscriber&) = delete;
  ShardSubscriber& operator=(const ShardSubscriber&) = delete;

  // Subscribes to `channel` unless subscribed already; dials first when
  // there is no connection. True once the node confirmed a subscription
  // made now, false when it was there already; an error when it could not
  // be made within the command timeout (the waiter then polls). One caller
  // subscribes at a time; any thread.
  absl::StatusOr<bool> Watch(const std::string& channel);
  // Closes the connection and ends the thread; Watch() fails from then on.
  void Stop();

 private:
  // Dials and starts the listener, unless connected. Under dial_mu_.
  absl::Status Connect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(dial_mu_);
  // Reads `conn` until it fails or Stop().
  void Listen(const std::shared_ptr<Connection>& conn);
  // One reply on the subscribed connection.
  void Handle(const redisReply* reply);
  // The connection failed: every subscription is gone.
  void Drop(const std::shared_ptr<Connection>& conn);

  const ConnectionConfig config_;
  const Callbacks callbacks_;
  // eventfd that ends the listener's read and a dial in progress: Stop().
  int stop_fd_ = -1;
  absl::Mutex dial_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one Watch() subscribes
  std::thread listener_ ABSL_GUARDED_BY(dial_mu_);
  absl::Mutex mu_;
  absl::CondVar answered_;  // a subscription confirmed or refused, or a drop
  std::shared_ptr<Connection> conn_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> subscribed_ ABSL_GUARDED_BY(mu_);
  // SSUBSCRIBE sent, in order, not answered yet.
  std::deque<std::string> asked_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Status> refused_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_SHARD_SUBSCRIBER_H_
