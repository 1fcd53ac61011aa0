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
// It keeps several such cells, one per key: a semaphore's workers guard one
// per permit slot (a slot has one holder at a time, C22), a lock's use key 0.
//
// Protocol, one line each way, the key last and optional (0):
// "W <token> <worker> [key]" -> "OK" | "STALE"; "G [key]" -> "<value>";
// "S <value> [key]" -> "OK".
#ifndef DLOCK_TESTS_HISTORY_HISTORY_REGISTER_H_
#define DLOCK_TESTS_HISTORY_HISTORY_REGISTER_H_

#include <atomic>
#include <cstdint>
#include <map>
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
  int key = 0;  // which cell
};

class RegisterServer {
 public:
  // Listens on a free loopback port; one thread serves every connection.
  static absl::StatusOr<std::unique_ptr<RegisterServer>> Start();
  ~RegisterServer();

  int port() const { return port_; }
  // Every cell's writes, in the order the register decided them.
  std::vector<RegisterWrite> Writes() const;
  int64_t counter(int key = 0) const;
  // Counter writes applied. Counted here, not from the workers' logs: a
  // worker killed with SIGKILL can have its write applied and die before
  // it logs it.
  int64_t sets(int key = 0) const;
  uint64_t max_token(int key = 0) const;
  // The worker whose write was accepted last (-1 before any): who holds the
  // lock as far as the resource can tell.
  int last_writer(int key = 0) const;

 private:
  RegisterServer() = default;
  void Serve();
  // Answers one request line.
  std::string Handle(const std::string& line);

  int listen_fd_ = -1;
  int stop_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  // One fenced register and counter.
  struct Cell {
    uint64_t max_token = 0;
    int64_t counter = 0;
    int64_t sets = 0;
    int last_writer = -1;
  };
  Cell CellOf(int key) const;

  mutable absl::Mutex mu_;
  std::map<int, Cell> cells_ ABSL_GUARDED_BY(mu_);
  std::vector<RegisterWrite> writes_ ABSL_GUARDED_BY(mu_);
};

// A worker's connection to the register; reconnects when it breaks.
class RegisterClient {
 public:
  explicit RegisterClient(int port) : port_(port) {}
  ~RegisterClient();
  // true: accepted; false: refused as stale.
  absl::StatusOr<bool> Write(uint64_t token, int worker, int key = 0);
  absl::StatusOr<int64_t> Get(int key = 0);
  absl::Status Set(int64_t value, int key = 0);

 private:
  absl::StatusOr<std::string> Call(const std::string& request);
  int port_;
  int fd_ = -1;
  std::string buffer_;
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_HISTORY_HISTORY_REGISTER_H_
