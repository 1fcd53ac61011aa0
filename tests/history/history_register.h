// Copyright dlock authors. The resource the history checker's workers
// protect with the lock: a fenced register (a write carries the writer's
// fencing token and is refused when a larger token was seen before, as a
// storage service guarding itself with fencing tokens would) and an unfenced
// counter (read, then write back one more: updates are lost when two workers
// believe they hold the lock at once). The server runs in the checker's
// process on a loopback port, outside any fault proxy: the resource stays
// reachable whatever happens to the lock service. A worker stopped with
// SIGSTOP in the middle of a request holds nothing up.
//
// Protocol, one line each way: "W <token> <worker>" -> "OK" | "STALE";
// "G" -> "<value>"; "S <value>" -> "OK".
#ifndef DLOCK_TESTS_HISTORY_HISTORY_REGISTER_H_
#define DLOCK_TESTS_HISTORY_HISTORY_REGISTER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace dlock::test {

// One write the register accepted or refused, stamped with CLOCK_MONOTONIC
// when the register decided.
struct RegisterWrite {
  int64_t at_ns = 0;
  uint64_t token = 0;
  int worker = 0;
  bool accepted = false;
};

class RegisterServer {
 public:
  // Listens on a free loopback port; one thread serves every connection.
  static absl::StatusOr<std::unique_ptr<RegisterServer>> Start();
  ~RegisterServer();

  int port() const { return port_; }
  std::vector<RegisterWrite> Writes() const;
  int64_t counter() const;
  // Counter writes applied. Counted here, not from the workers' logs: a
  // worker killed with SIGKILL can have its write applied and die before
  // it logs it.
  int64_t sets() const;
  uint64_t max_token() const;
  // The worker whose write was accepted last (-1 before any): who holds the
  // lock as far as the resource can tell.
  int last_writer() const;

 private:
  RegisterServer() = default;
  void Serve();
  // Answers one request line.
  std::string Handle(const std::string& line);

  int listen_fd_ = -1;
  int stop_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  mutable absl::Mutex mu_;
  uint64_t max_token_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t counter_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t sets_ ABSL_GUARDED_BY(mu_) = 0;
  int last_writer_ ABSL_GUARDED_BY(mu_) = -1;
  std::vector<RegisterWrite> writes_ ABSL_GUARDED_BY(mu_);
};

// A worker's connection to the register; reconnects when it breaks.
class RegisterClient {
 public:
  explicit RegisterClient(int port) : port_(port) {}
  ~RegisterClient();
  // true: accepted; false: refused as stale.
  absl::StatusOr<bool> Write(uint64_t token, int worker);
  absl::StatusOr<int64_t> Get();
  absl::Status Set(int64_t value);

 private:
  absl::StatusOr<std::string> Call(const std::string& request);
  int port_;
  int fd_ = -1;
  std::string buffer_;
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_HISTORY_HISTORY_REGISTER_H_
