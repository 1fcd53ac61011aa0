#include "pg_listener.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "pg_pooler.h"

namespace dlock::postgres {
namespace {

constexpr absl::Duration kSweepEvery = absl::Minutes(5);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);

}  // namespace

PgListener::PgListener(const PgOptions& options, const Sql& sql, std::string ns,
                       WakeupHub& hub, Watcher* watcher)
    : options_(options.listen_dbname.empty()
                   ? options
                   : WithDbname(options, options.listen_dbname)),
      sql_(sql),
      prefix_(absl::StrCat(ns, ":")),
      hub_(hub),
      watcher_(watcher) {
  if (pipe2(wake_pipe_, O_NONBLOCK | O_CLOEXEC) != 0) {
    wake_pipe_[0] = wake_pipe_[1] = -1;
  }
}

PgListener::~PgListener() {
  Stop();
  if (wake_pipe_[0] >= 0) close(wake_pipe_[0]);
  if (wake_pipe_[1] >= 0) close(wake_pipe_[1]);
}

absl::Status PgListener::Start(bool listen) {
  listen_ = listen;
  if (absl::Status s = Connect(); !s.ok()) {
    return absl::Status(
        absl::IsUnavailable(s) ? absl::StatusCode::kUnavailable : s.code(),
        absl::StrCat("cannot listen for releases (LISTEN): ", s.message()));
  }
  if (listen_ && !options_.listen_dbname.empty()) {
    absl::StatusOr<Pooling> pooling = DetectPooling(options_, *conn_);
    if (!pooling.ok()) return pooling.status();
    if (*pooling == Pooling::kTransactions) {
      return absl::FailedPreconditionError(absl::StrCat(
          options_.endpoint, ": listen_dbname '", options_.listen_dbname,
          "' is pooled by transaction too; LISTEN needs a database alias "
          "with pool_mode = session (docs/postgres.md, \"PgBouncer\")"));
    }
  }
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void PgListener::Stop() {
  stop_ = true;
  Wake();
  if (thread_.joinable()) thread_.join();
  conn_.reset();
}

void PgListener::Wake() {
  if (wake_pipe_[1] >= 0) {
    char c = 1;
    ssize_t n = write(wake_pipe_[1], &c, 1);
    (void)n;  // a full pipe already means "wake up"
  }
}

absl::Status PgListener::Connect() {
  absl::StatusOr<std::unique_ptr<PgConn>> conn = PgConn::Open(options_);
  if (!conn.ok()) return conn.status();
  if (listen_) {
    if (absl::Status s = (*conn)->Exec(sql_.listen); !s.ok()) return s;
  }
  conn_ = *std::move(conn);
  return absl::OkStatus();
}

void PgListener::Drain() {
  if (PQconsumeInput(conn_->raw()) == 0) {
    conn_.reset();
    return;
  }
  while (PGnotify* n = PQnotifies(conn_->raw())) {
    absl::string_view payload(n->extra);
    if (absl::StartsWith(payload, prefix_)) {
      hub_.Notify(payload.substr(prefix_.size()));
    }
    PQfreemem(n);
  }
}

void PgListener::Loop() {
  const Clock& clock = Clock::Real();
  absl::Duration backoff = absl::Milliseconds(20);
  MonoTime next_sweep = clock.Now() + absl::Minutes(1);
  while (!stop_) {
    absl::Duration wait = absl::Seconds(1);
    if (conn_ == nullptr) {
      if (Connect().ok()) {
        backoff = absl::Milliseconds(20);
        // Releases announced while we were away were missed: every waiter
        // looks again. (Start() set up the first LISTEN before any waiter.)
        hub_.NotifyAll();
      } else {
        wait = backoff;
        backoff = std::min(backoff * 2, kMaxBackoff);
      }
    }
    std::vector<pollfd> fds;
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    if (conn_ != nullptr) fds.push_back({conn_->socket(), POLLIN, 0});
    const size_t first_watched = fds.size();
    if (watcher_ != nullptr) {
      for (int fd : watcher_->Fds()) fds.push_back({fd, POLLIN, 0});
    }
    const int n = poll(fds.data(), fds.size(),
                       static_cast<int>(absl::ToInt64Milliseconds(wait)));
    if (stop_) break;
    if (n > 0 && (fds[0].revents & POLLIN)) {
      char buf[64];
      while (read(wake_pipe_[0], buf, sizeof(buf)) > 0) {
      }
    }
    if (conn_ != nullptr && n > 0 && fds[1].revents != 0) Drain();
    for (size_t i = first_watched; n > 0 && i < fds.size(); ++i) {
      if (fds[i].revents != 0) watcher_->OnReadable(fds[i].fd);
    }
    if (conn_ != nullptr && clock.Now() >= next_sweep) {
      next_sweep = clock.Now() + kSweepEvery;
      if (!conn_->Run(sql_.sweep, {}).ok() && conn_->broken()) {
        conn_.reset();
      } else {
        Drain();  // notifications that came while the sweep ran
      }
    }
  }
}

}  // namespace dlock::postgres
