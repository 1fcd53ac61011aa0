// Copyright dlock authors. The byte stream under every Redis connection of
// dlock (command, subscription, Sentinel): plain TCP, or TLS over it. Dialed
// within a deadline and cancellable; every read and write waits in poll() up
// to a deadline, so nothing blocks for good on a silent server. RESP is
// spoken over it by redis_connection.h.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_TRANSPORT_H_
#define DLOCK_BACKENDS_REDIS_REDIS_TRANSPORT_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dlock::redis {

using Deadline = std::chrono::steady_clock::time_point;
inline constexpr Deadline kNoDeadline = Deadline::max();
// Now plus `timeout`, on the monotonic clock.
Deadline DeadlineIn(absl::Duration timeout);

class TlsContext;  // redis_tls.h

// How a connection is secured. Without a context: plain TCP.
struct TlsSettings {
  std::shared_ptr<const TlsContext> context;
  // SNI and the name (or IP address) the server's certificate must carry
  // (tls_server_name); empty: the host dialed.
  std::string server_name;
};

// A connected stream to one server. One thread may write while another
// reads (the multiplexer does); two readers or two writers at once may not.
class Stream {
 public:
  virtual ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Writes every byte of `bytes` by `deadline`. Unavailable when the
  // connection fails, DeadlineExceeded when the deadline passes first.
  virtual absl::Status Write(absl::string_view bytes, Deadline deadline) = 0;
  // Reads what has arrived, at least one byte and at most `size`, waiting
  // until `deadline`. Returns 0, having read nothing, once `wake_fd` (-1:
  // none) turns readable. Unavailable when the server closed the connection
  // or it failed, DeadlineExceeded when the deadline passes first.
  virtual absl::StatusOr<size_t> Read(char* buf, size_t size, Deadline deadline,
                                      int wake_fd) = 0;
  virtual bool tls() const = 0;

  // Ends every Read() and Write() in progress, and every one to come, at
  // once (shutdown(2)): for a thread that fails the connection while
  // another waits on it. Any thread.
  void Shutdown();
  int fd() const { return fd_; }
  const std::string& endpoint() const { return endpoint_; }

 protected:
  // WaitFor() on the socket, as Read() and Write() report it: true once
  // ready, false once `wake_fd` turned readable, DeadlineExceeded once the
  // deadline passed (saying whether bytes were awaited or refused).
  absl::StatusOr<bool> Await(short events, Deadline deadline,
                             int wake_fd) const;

  // Takes ownership of `fd`, a connected non-blocking socket.
  Stream(int fd, std::string endpoint)
      : fd_(fd), endpoint_(std::move(endpoint)) {}

 private:
  const int fd_;
  const std::string endpoint_;
};

// A plain stream over `fd`, a connected socket (made non-blocking here),
// which it owns: for Dial(), and for tests that hand a connection a socket
// of their own.
std::unique_ptr<Stream> PlainStream(int fd, std::string endpoint);

// Connects to host:port, trying every address the name resolves to in
// turn, then, with TLS, runs the handshake and checks the server's
// certificate and name, all by `deadline`. Gives up with Cancelled as soon
// as `cancel_fd` (-1: none) turns readable, so that a thread being stopped
// stops at once. Unavailable when the server cannot be reached or the
// handshake fails; Unauthenticated when a certificate is refused (the
// server's by this client, or this client's by the server). `endpoint`
// names the server in messages.
absl::StatusOr<std::unique_ptr<Stream>> Dial(const std::string& host, int port,
                                             const TlsSettings& tls,
                                             const std::string& endpoint,
                                             Deadline deadline, int cancel_fd);

// What WaitFor() saw first.
enum class Ready { kReady, kTimedOut, kWoken };
// Waits until `fd` is ready for `events` (POLLIN, POLLOUT), `deadline`
// passes, or `wake_fd` (-1: none) turns readable, whichever comes first
// (the wake-up wins a tie). An error on `fd` counts as ready: the call
// that follows reports it.
Ready WaitFor(int fd, short events, Deadline deadline, int wake_fd);

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_TRANSPORT_H_
