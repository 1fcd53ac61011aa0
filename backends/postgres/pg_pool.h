// Copyright dlock authors. A bounded set of connections shared by the
// threads of one client. Connections are opened on demand, checked before
// reuse (a server restart leaves them dead), and dropped when broken, so the
// next use reconnects (C18).
#ifndef DLOCK_BACKENDS_POSTGRES_PG_POOL_H_
#define DLOCK_BACKENDS_POSTGRES_PG_POOL_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dlock/clock.h"
#include "pg_conn.h"

namespace dlock::postgres {

class PgPool {
 public:
  // A checked-out connection; back to the pool (or closed, if broken) when
  // destroyed. Movable, so a session can keep one for as long as it holds.
  class Handle {
   public:
    Handle() = default;
    Handle(PgPool* pool, std::unique_ptr<PgConn> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    Handle(Handle&& other) = default;
    Handle& operator=(Handle&& other);
    ~Handle() { Return(); }
    PgConn* operator->() const { return conn_.get(); }
    PgConn& operator*() const { return *conn_; }
    explicit operator bool() const { return conn_ != nullptr; }
    // Closes the connection instead of reusing it (its session state is
    // unknown, e.g. it may still hold an advisory lock).
    void Discard();

   private:
    void Return();
    PgPool* pool_ = nullptr;
    std::unique_ptr<PgConn> conn_;
  };

  PgPool(const PgOptions& options, int size, absl::string_view what)
      : options_(options), size_(size), what_(what) {}
  ~PgPool() = default;

  // A connection, waiting up to the statement timeout for one to be free.
  // Unavailable naming the endpoint when none can be had.
  absl::StatusOr<Handle> Get();
  // Closes idle connections; later Get() calls still work.
  void Clear();

 private:
  void Put(std::unique_ptr<PgConn> conn);

  const PgOptions& options_;
  const int size_;
  const std::string what_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<PgConn>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;  // idle plus checked out
  // Signalled when a connection comes back or a place frees up. Waits count
  // on the monotonic clock (absl's timed waits count on the wall clock).
  ClockCondVar freed_{Clock::Real()};
};

}  // namespace dlock::postgres

#endif  // DLOCK_BACKENDS_POSTGRES_PG_POOL_H_
