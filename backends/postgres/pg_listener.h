// Copyright dlock authors. One thread per client with a dedicated connection
// that LISTENs for releases and wakes local waiters (C9). It reconnects by
// itself and then wakes every waiter, since announcements may have been
// missed meanwhile (C18). It also sweeps long-free rows, and in session mode
// watches the sockets of idle session connections, so that a dropped session
// is reported at once.
#ifndef DLOCK_BACKENDS_POSTGRES_PG_LISTENER_H_
#define DLOCK_BACKENDS_POSTGRES_PG_LISTENER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "dlock/backend/wakeup.h"
#include "pg_conn.h"
#include "pg_schema.h"

namespace dlock::postgres {

class PgListener {
 public:
  // Extra sockets to watch (session mode).
  class Watcher {
   public:
    virtual ~Watcher() = default;
    virtual std::vector<int> Fds() = 0;
    virtual void OnReadable(int fd) = 0;
  };

  PgListener(const PgOptions& options, const Sql& sql, std::string ns,
             WakeupHub& hub, Watcher* watcher);
  ~PgListener();
  PgListener(const PgListener&) = delete;
  PgListener& operator=(const PgListener&) = delete;

  // Connects and LISTENs before the thread starts, so that no release is
  // announced unheard after the client's Connect() returned (C9). Bounded by
  // libpq's connect_timeout and the statement timeout; Unavailable naming
  // the endpoint when the listener cannot be set up. It connects to
  // options.listen_dbname when given, which must keep its server session
  // (FailedPrecondition otherwise). Without `listen` (behind transaction
  // pooling, where a LISTEN stays on a server connection that other clients
  // get) it only sweeps and watches.
  absl::Status Start(bool listen = true);
  void Stop();
  // Makes the thread look at Watcher::Fds() again.
  void Wake();

 private:
  void Loop();
  absl::Status Connect();
  void Drain();

  const PgOptions options_;  // with listen_dbname as the database, if given
  const Sql& sql_;
  const std::string prefix_;  // "<namespace>:" as in a notification payload
  WakeupHub& hub_;
  Watcher* const watcher_;
  bool listen_ = true;  // set before the thread starts
  int wake_pipe_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::unique_ptr<PgConn> conn_;  // only the thread touches it
  std::thread thread_;
};

}  // namespace dlock::postgres

#endif  // DLOCK_BACKENDS_POSTGRES_PG_LISTENER_H_
