// Copyright dlock authors. An HTTP server for Prometheus scrapes, on
// cpp-httplib (libcpp-httplib-dev): `GET /metrics` answers 200 with what
// `render` returns, as `Content-Type: text/plain; version=0.0.4;
// charset=utf-8`; any other path is 404, any other method on /metrics 405. One
// request per connection (Connection: close).
//
//   auto metrics = std::make_shared<dlock::PrometheusMetrics>();
//   auto server = dlock::MetricsHttpServer::Start(
//       "127.0.0.1", 9464, [metrics] { return metrics->RenderText(); });
//   if (!server.ok()) ...;   // InvalidArgument, or Unavailable: port taken
//   std::cout << (*server)->port();
//
// `dlock monitor` serves its metrics with this class and PrometheusMetrics.
//
// Concurrency: kServingThreads threads serve connections, so that many
// scrapes are served at once (more wait their turn) and `render` may run on
// several threads at once. A client has kIdleTimeout to start its request
// and kRequestTimeout to send it and take the response.
#ifndef DLOCK_ADAPTERS_METRICS_HTTP_H_
#define DLOCK_ADAPTERS_METRICS_HTTP_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace dlock {

class MetricsHttpServer {
 public:
  static constexpr int kServingThreads = 4;
  // Also how long Stop() may wait for a connection that sends nothing.
  static constexpr absl::Duration kIdleTimeout = absl::Seconds(1);
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

  // Closes the listening socket and joins every thread; returns once none
  // runs. A render in progress is waited for, and so is a connection that
  // has sent nothing yet, for at most kIdleTimeout. Idempotent.
  void Stop();

 private:
  MetricsHttpServer(std::unique_ptr<httplib::Server> server, int port);

  const std::unique_ptr<httplib::Server> server_;
  const int port_;

  // Held for the whole of Stop(), so that a second Stop() returns only once
  // the first has joined the serving thread.
  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
  // Accepts and hands connections to httplib's pool until Stop().
  std::thread listener_ ABSL_GUARDED_BY(stop_mu_);
};

}  // namespace dlock

#endif  // DLOCK_ADAPTERS_METRICS_HTTP_H_
