#include "dlock/adapters/metrics_http.h"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/adapters/metrics.h"

namespace dlock {
namespace {

constexpr char kMetricsPath[] = "/metrics";

// SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which would let a
// second server bind a port this one serves.
void ReuseAddress(int fd) {
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
}

std::chrono::microseconds Micros(absl::Duration d) {
  return std::chrono::microseconds(absl::ToInt64Microseconds(d));
}

void Route(httplib::Server& server, std::function<std::string()> render) {
  server.set_pre_routing_handler(
      [](const httplib::Request& request, httplib::Response& response) {
        if (request.path != kMetricsPath || request.method == "GET") {
          return httplib::Server::HandlerResponse::Unhandled;
        }
        response.status = 405;
        response.set_header("Allow", "GET");
        response.set_content("only GET is served\n", "text/plain");
        return httplib::Server::HandlerResponse::Handled;
      });
  server.Get(
      kMetricsPath, [render = std::move(render)](const httplib::Request&,
                                                 httplib::Response& response) {
        try {
          response.set_content(render(),
                               std::string(PrometheusMetrics::kContentType));
        } catch (const std::exception& e) {
          response.status = 500;
          response.set_content(
              absl::StrCat("rendering the metrics failed: ", e.what(), "\n"),
              "text/plain");
        }
      });
  server.set_error_handler(
      [](const httplib::Request&, httplib::Response& response) {
        if (response.status == 404) {
          response.set_content("not found: the metrics are at /metrics\n",
                               "text/plain");
        }
      });
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    absl::string_view host, int port, std::function<std::string()> render) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port ", port, " is not in 0..65535"));
  }
  if (!render) {
    return absl::InvalidArgumentError("the metrics server needs a renderer");
  }
  // httplib says only that binding failed; a name that does not resolve is
  // the caller's mistake, told apart here.
  const std::string host_text(host);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host_text.c_str(), nullptr, &hints, &found);
      rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics host '", host, "' does not resolve: ", gai_strerror(rc)));
  }
  freeaddrinfo(found);

  auto server = std::make_unique<httplib::Server>();
  server->new_task_queue = [] {
    return new httplib::ThreadPool(kServingThreads);
  };
  server->set_socket_options(ReuseAddress);
  server->set_keep_alive_max_count(1);  // Connection: close
  server->set_keep_alive_timeout(absl::ToInt64Seconds(kIdleTimeout));
  server->set_read_timeout(Micros(kRequestTimeout));
  server->set_write_timeout(Micros(kRequestTimeout));
  Route(*server, std::move(render));
  const int bound = port == 0 ? server->bind_to_any_port(host_text)
                    : server->bind_to_port(host_text, port) ? port
                                                            : -1;
  if (bound < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", host, ":", port,
                     ": the address is in use or not one of this machine's"));
  }
  std::unique_ptr<MetricsHttpServer> metrics(
      new MetricsHttpServer(std::move(server), bound));
  auto listening_ended = std::make_shared<std::atomic<bool>>(false);
  absl::MutexLock lock(&metrics->stop_mu_);
  metrics->listener_ =
      std::thread([s = metrics->server_.get(), listening_ended] {
        s->listen_after_bind();
        *listening_ended = true;
      });
  // httplib's stop() does nothing before its loop runs: a Stop() right
  // after Start() would then wait forever.
  while (!metrics->server_->is_running() && !*listening_ended) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  return metrics;
}

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<httplib::Server> server,
                                     int port)
    : server_(std::move(server)), port_(port) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  absl::MutexLock lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  server_->stop();
  // listen_after_bind() returns once its pool has ended its connections.
  if (listener_.joinable()) listener_.join();
}

}  // namespace dlock
