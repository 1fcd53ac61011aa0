// Copyright dlock authors. One pub/sub connection per client that turns
// release announcements into local wake-ups (C9).
#ifndef DLOCK_BACKENDS_REDIS_REDIS_SUBSCRIBER_H_
#define DLOCK_BACKENDS_REDIS_REDIS_SUBSCRIBER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "dlock/backend/wakeup.h"
#include "redis_connection.h"

namespace dlock::redis {

class Subscriber {
 public:
  Subscriber(ConnectionConfig config, std::string channel, WakeupHub* hub);
  ~Subscriber();

  // Subscribes before returning, so that no announcement after Start() is
  // missed while the server stays up; then listens on its own thread and
  // resubscribes after a drop, waking every waiter in case one was missed.
  absl::Status Start();
  // Start() that goes on trying in the background when the first
  // subscription fails (a master of a quorum that is down now).
  void StartTrying();
  void Stop();

  // Drops the subscription and subscribes again on a new connection, at
  // once, waking every waiter: for when the address may now lead to another
  // server (the command connection found a demoted master). Non-blocking;
  // any thread.
  void Resubscribe();

 private:
  absl::Status Subscribe();
  void Run();
  // Reads until the connection fails, Resubscribe() or Stop(); returns
  // false on Stop().
  bool Listen();
  // Consumes the wake-ups of stop_fd_; true when stopping.
  bool Woken();

  const ConnectionConfig config_;
  const std::string channel_;
  WakeupHub* const hub_;
  std::unique_ptr<Connection> conn_;  // used by the listener thread only
  // eventfd that interrupts poll() and a dial: for Stop() and Resubscribe().
  int stop_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> resubscribe_{false};
  std::thread thread_;
};

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_SUBSCRIBER_H_
