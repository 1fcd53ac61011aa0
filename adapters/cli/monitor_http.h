// Copyright dlock authors. The smallest HTTP server that serves the
// monitor's metrics (GET /metrics) to a Prometheus scraper: one thread,
// one request per connection. Same shape as the adapters' metrics server
// (MetricsHttpServer::Start(host, port, render)), which can replace it.
#ifndef DLOCK_ADAPTERS_CLI_MONITOR_HTTP_H_
#define DLOCK_ADAPTERS_CLI_MONITOR_HTTP_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dlock::cli {

// "host:port" (host may be empty for every address, port 0 for any free
// one) from --metrics-listen. InvalidArgument naming the flag otherwise.
struct ListenAddress {
  std::string host;
  int port = 0;
};
absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text);

class MonitorHttpServer {
 public:
  // Listens on host:port and answers GET /metrics with render()'s text
  // (called on the server's thread). Unavailable when it cannot listen.
  static absl::StatusOr<std::unique_ptr<MonitorHttpServer>> Start(
      const std::string& host, int port, std::function<std::string()> render);
  // Stops accepting and joins the thread.
  ~MonitorHttpServer();
  MonitorHttpServer(const MonitorHttpServer&) = delete;
  MonitorHttpServer& operator=(const MonitorHttpServer&) = delete;

  // The port listened on (the one picked when 0 was asked).
  int port() const { return port_; }

 private:
  MonitorHttpServer(int listen_fd, int port,
                    std::function<std::string()> render);
  void Serve();
  void Answer(int fd);

  const int listen_fd_;
  const int port_;
  const std::function<std::string()> render_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_MONITOR_HTTP_H_
