// Copyright dlock authors. One pub/sub connection that hands each message of
// one channel to a callback: a client's release announcements, turned into
// local wake-ups (C9), or a Sentinel's news of a failover.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_SUBSCRIBER_H_
#define DLOCK_BACKENDS_REDIS_REDIS_SUBSCRIBER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "dlock/backend/wakeup.h"
#include "redis_connection.h"

namespace dlock::redis {

// The message of a reply on a subscribed connection that carries one
// (["message", channel, message]); nullopt for the rest (the confirmation
// of SUBSCRIBE, say).
std::optional<absl::string_view> PublishedMessage(const redisReply* reply);

// Ends the announcement of a release whose hold one caller was refused
// (scripts/prelude.lua, announce_release): its waiter races nobody.
inline constexpr char kOneWaiterMark = '\x1e';

// Wakes the waiters a release announcement names (a lock's hub name, with
// kOneWaiterMark after it or not).
void WakeOnAnnouncement(WakeupHub& hub, absl::string_view message);

class Subscriber {
 public:
  // Called on the subscriber's thread.
  struct Callbacks {
    std::function<void(absl::string_view message)> on_message;
    // Messages may have been missed (the connection dropped), and the
    // subscription is back.
    std::function<void()> on_gap;
  };
  Subscriber(ConnectionConfig config, std::string channel, Callbacks callbacks);
  ~Subscriber();

  // Subscribes before returning, so that no announcement after Start() is
  // missed while the server stays up; then listens on its own thread and
  // resubscribes after a drop, calling on_gap when it drops and again when
  // it is back.
  absl::Status Start();
  // Start() that goes on trying in the background when the first
  // subscription fails (a master of a quorum that is down now).
  void StartTrying();
  void Stop();

  // Drops the subscription and subscribes again on a new connection, at
  // once, calling on_gap: for when the address may now lead to another
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
  const Callbacks callbacks_;
  std::unique_ptr<Connection> conn_;  // used by the listener thread only
  // eventfd that interrupts poll() and a dial: for Stop() and Resubscribe().
  int stop_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> resubscribe_{false};
  std::thread thread_;
};

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_SUBSCRIBER_H_
