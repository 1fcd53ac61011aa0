// Copyright dlock authors. A minimal HTTP/1.x server for Prometheus scrapes:
// `GET /metrics` answers 200 with what `render` returns, as
// `Content-Type: text/plain; version=0.0.4; charset=utf-8`; any other path
// is 404, any other method on /metrics 405. One request per connection
// (Connection: close). Written on plain sockets: no HTTP library needed.
//
//   auto metrics = std::make_shared<dlock::PrometheusMetrics>();
//   auto server = dlock::MetricsHttpServer::Start(
//       "127.0.0.1", 9464, [metrics] { return metrics->RenderText(); });
//   if (!server.ok()) ...;   // InvalidArgument, or Unavailable: port taken
//   std::cout << (*server)->port();
//
// `dlock monitor` serves its metrics with this class and PrometheusMetrics.
//
// Concurrency: kServingThreads threads accept and serve connections, so
// that many scrapes are served at once (more wait in the listen queue) and
// `render` may run on several threads at once. A client has kRequestTimeout
// to send its request and take the response.
#ifndef DLOCK_ADAPTERS_METRICS_HTTP_H_
#define DLOCK_ADAPTERS_METRICS_HTTP_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dlock {

class MetricsHttpServer {
 public:
  static constexpr int kServingThreads = 4;
  static constexpr absl::Duration kRequestTimeout = absl::Seconds(5);

  // Binds `host` ("127.0.0.1", "::1", "0.0.0.0", "localhost") and `port`
  // (0: a free port, see port()) and starts serving. InvalidArgument for a
  // host that does not resolve or a port outside 0..65535; Unavailable when
  // the address cannot be bound (in use, not local).
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      absl::string_view host, int port, std::function<std::string()> render);

  // Stops, like Stop().
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The port bound: the one asked for, or the one picked for port 0.
  int port() const { return port_; }

  // Closes the listening socket, ends the connections being served and
  // joins every thread; returns once none runs. A render in progress is
  // waited for. Idempotent.
  void Stop();

 private:
  MetricsHttpServer(int listen_fd, int wake_read, int wake_write, int port,
                    std::function<std::string()> render);
  // What each serving thread runs until Stop().
  void ServeLoop();
  void Serve(int fd);
  // Waits until `fd` is ready for `events` (POLLIN, POLLOUT); false at the
  // deadline or when Stop() was called.
  bool WaitFor(int fd, short events, absl::Time deadline) const;
  // The response to one request's head (the text up to the empty line).
  std::string Respond(absl::string_view head) const;

  const int listen_fd_;
  // Stop() writes to wake_write_ so that poll() in every thread returns.
  const int wake_read_;
  const int wake_write_;
  const int port_;
  const std::function<std::string()> render_;

  // Held for the whole of Stop(), so that a second Stop() returns only once
  // the first has joined every thread.
  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(stop_mu_);
};

}  // namespace dlock

#endif  // DLOCK_ADAPTERS_METRICS_HTTP_H_
