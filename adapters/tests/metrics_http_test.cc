// MetricsHttpServer (dlock/adapters/metrics_http.h) over real TCP: status
// codes, headers, concurrent scrapes, a prompt Stop().
#include "dlock/adapters/metrics_http.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "dlock/adapters/metrics.h"
#include "gtest/gtest.h"
#include "metrics_testing.h"
#include "status_testing.h"

namespace dlock {
namespace {

std::unique_ptr<MetricsHttpServer> MustStart(
    std::function<std::string()> render) {
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> server =
      MetricsHttpServer::Start("127.0.0.1", 0, std::move(render));
  EXPECT_OK(server);
  return server.ok() ? *std::move(server) : nullptr;
}

TEST(MetricsHttpServer, ServesMetricsAsPrometheusText) {
  auto metrics = std::make_shared<PrometheusMetrics>();
  metrics->OnAcquireAttempt({.lock_namespace = "web"});
  auto server = MustStart([metrics] { return metrics->RenderText(); });
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  absl::StatusOr<std::string> response =
      test::HttpGet(server->port(), "/metrics");
  ASSERT_OK(response);
  EXPECT_TRUE(absl::StartsWith(*response, "HTTP/1.1 200 OK\r\n")) << *response;
  EXPECT_TRUE(absl::StrContains(
      *response,
      "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"))
      << *response;
  const std::string body = test::HttpBody(*response);
  EXPECT_EQ(body, metrics->RenderText());
  EXPECT_TRUE(absl::StrContains(
      *response, absl::StrCat("\r\nContent-Length: ", body.size(), "\r\n")));
  EXPECT_TRUE(absl::StrContains(
      body, "dlock_acquire_attempts_total{namespace=\"web\"} 1\n"));
  EXPECT_EQ(test::ParsePrometheus(body).code, 0);
  // A query string is no other path.
  response = test::HttpGet(server->port(), "/metrics?name[]=x");
  ASSERT_OK(response);
  EXPECT_TRUE(absl::StartsWith(*response, "HTTP/1.1 200 OK\r\n"));
}

TEST(MetricsHttpServer, OtherPathsAre404AndOtherMethods405) {
  auto server = MustStart([] { return std::string("x 1\n"); });
  ASSERT_NE(server, nullptr);
  for (const char* path : {"/", "/metricsx", "/favicon.ico"}) {
    absl::StatusOr<std::string> response = test::HttpGet(server->port(), path);
    ASSERT_OK(response);
    EXPECT_TRUE(absl::StartsWith(*response, "HTTP/1.1 404 Not Found\r\n"))
        << path << ": " << *response;
  }
  absl::StatusOr<std::string> post = test::HttpExchange(
      server->port(),
      "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  ASSERT_OK(post);
  EXPECT_TRUE(absl::StartsWith(*post, "HTTP/1.1 405 Method Not Allowed\r\n"))
      << *post;
  EXPECT_TRUE(absl::StrContains(*post, "\r\nAllow: GET\r\n"));
  absl::StatusOr<std::string> garbage =
      test::HttpExchange(server->port(), "hello\r\n\r\n");
  ASSERT_OK(garbage);
  EXPECT_TRUE(absl::StartsWith(*garbage, "HTTP/1.1 400 Bad Request\r\n"))
      << *garbage;
}

TEST(MetricsHttpServer, ServesConcurrentScrapes) {
  // Each render waits until several are in progress at once: served one at
  // a time, the scrapes would never get there.
  absl::Mutex mu;
  int rendering = 0;
  bool overlapped = false;
  auto server = MustStart([&] {
    absl::MutexLock lock(&mu);
    if (++rendering >= 2) overlapped = true;
    mu.AwaitWithTimeout(absl::Condition(&overlapped), absl::Seconds(5));
    --rendering;
    return std::string("up 1\n");
  });
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 8;
  constexpr int kEach = 10;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        absl::StatusOr<std::string> r =
            test::HttpGet(server->port(), "/metrics");
        if (r.ok() && absl::StartsWith(*r, "HTTP/1.1 200 OK\r\n") &&
            test::HttpBody(*r) == "up 1\n") {
          ++ok;
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(overlapped);
  EXPECT_EQ(ok.load(), kClients * kEach);
}

TEST(MetricsHttpServer, StopReturnsPromptlyWithIdleConnectionsOpen) {
  auto server = MustStart([] { return std::string("up 1\n"); });
  ASSERT_NE(server, nullptr);
  // Clients that connect and say nothing hold every serving thread.
  std::vector<std::thread> idle;
  for (int i = 0; i < MetricsHttpServer::kServingThreads + 2; ++i) {
    idle.emplace_back([port = server->port()] {
      test::HttpExchange(port, "").IgnoreError();
    });
  }
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time start = absl::Now();
  server->Stop();
  // Well before the request timeout that would end them otherwise.
  EXPECT_LT(absl::Now() - start, MetricsHttpServer::kRequestTimeout / 2);
  server->Stop();  // idempotent
  server.reset();
  for (std::thread& t : idle) t.join();
}

TEST(MetricsHttpServer, BadAddressesAreRefused) {
  auto render = [] { return std::string(); };
  EXPECT_EQ(
      MetricsHttpServer::Start("127.0.0.1", 70000, render).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsHttpServer::Start("no-such-host.invalid", 0, render)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  auto first = MustStart(render);
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> second =
      MetricsHttpServer::Start("127.0.0.1", first->port(), render);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable)
      << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(),
                                absl::StrCat(first->port())));
}

}  // namespace
}  // namespace dlock
