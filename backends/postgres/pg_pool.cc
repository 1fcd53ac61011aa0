#include "pg_pool.h"

#include "absl/strings/str_cat.h"

namespace dlock::postgres {

PgPool::Handle& PgPool::Handle::operator=(Handle&& other) {
  if (this != &other) {
    Return();
    pool_ = other.pool_;
    conn_ = std::move(other.conn_);
  }
  return *this;
}

void PgPool::Handle::Discard() {
  if (conn_ == nullptr) return;
  conn_.reset();
  {
    absl::MutexLock lock(&pool_->mu_);
    --pool_->open_;
  }
  pool_->freed_.SignalOne();
}

void PgPool::Handle::Return() {
  if (conn_ != nullptr) pool_->Put(std::move(conn_));
}

void PgPool::Put(std::unique_ptr<PgConn> conn) {
  const bool keep = !conn->broken();
  if (!keep) conn.reset();  // closes outside the lock below
  {
    absl::MutexLock lock(&mu_);
    if (keep) {
      idle_.push_back(std::move(conn));
    } else {
      --open_;
    }
  }
  freed_.SignalOne();
}

absl::StatusOr<PgPool::Handle> PgPool::Get() {
  const Clock& clock = freed_.clock();
  const MonoTime deadline = clock.Now() + options_.statement_timeout;
  while (true) {
    std::unique_ptr<PgConn> conn;
    bool open_new = false;
    {
      absl::MutexLock lock(&mu_);
      while (idle_.empty() && open_ >= size_ && clock.Now() < deadline) {
        freed_.WaitUntil(&mu_, deadline);
      }
      if (idle_.empty() && open_ >= size_) {
        return absl::UnavailableError(
            absl::StrCat(options_.endpoint, ": all ", size_, " ", what_,
                         " connections stayed busy for ",
                         absl::FormatDuration(options_.statement_timeout),
                         "; raise pool_size/max_sessions"));
      }
      if (!idle_.empty()) {
        conn = std::move(idle_.back());
        idle_.pop_back();
      } else {
        ++open_;
        open_new = true;
      }
    }
    if (open_new) {
      absl::StatusOr<std::unique_ptr<PgConn>> opened = PgConn::Open(options_);
      if (!opened.ok()) {
        {
          absl::MutexLock lock(&mu_);
          --open_;
        }
        freed_.SignalOne();
        return opened.status();
      }
      return Handle(this, *std::move(opened));
    }
    // An idle connection may have died with a server restart: drop it and
    // look again rather than fail the caller's statement on it.
    if (conn->Alive()) return Handle(this, std::move(conn));
    conn.reset();
    absl::MutexLock lock(&mu_);
    --open_;  // this thread takes the place itself on its next round
  }
}

void PgPool::Clear() {
  std::vector<std::unique_ptr<PgConn>> idle;
  {
    absl::MutexLock lock(&mu_);
    idle.swap(idle_);
    open_ -= static_cast<int>(idle.size());
  }
  freed_.Signal();  // every waiter: the pool is closing
}

}  // namespace dlock::postgres
