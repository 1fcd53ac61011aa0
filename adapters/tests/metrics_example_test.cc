// examples/metrics_service.cc runs as a service: its /metrics page is
// served over HTTP, parses with the reference parser, and counts what the
// example did.
#include <csignal>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "metrics_testing.h"
#include "status_testing.h"

namespace dlock {
namespace {

constexpr char kExample[] = DLOCK_METRICS_EXAMPLE_PATH;

// The port from the example's first line, once it is printed.
int WaitForPort(test::Process& process) {
  const std::string prefix = "serving metrics on http://127.0.0.1:";
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    const std::string out = process.out();
    if (size_t at = out.find(prefix); at != std::string::npos) {
      const size_t end = out.find("/metrics", at);
      int port = 0;
      if (end != std::string::npos &&
          absl::SimpleAtoi(absl::string_view(out).substr(
                               at + prefix.size(), end - at - prefix.size()),
                           &port)) {
        return port;
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return 0;
}

TEST(MetricsExample, ServesParsableMetricsOfWhatItDid) {
  test::Process example({kExample, "--port", "0", "--locks", "5"},
                        {"DLOCK_BACKEND=memory://metrics-example",
                         "DLOCK_CONFIG=", "DLOCK_PROFILE="});
  const int port = WaitForPort(example);
  ASSERT_GT(port, 0) << example.out() << example.err();
  absl::StatusOr<std::string> response = test::HttpGet(port, "/metrics");
  ASSERT_OK(response);
  ASSERT_TRUE(absl::StartsWith(*response, "HTTP/1.1 200 OK\r\n")) << *response;
  const std::string page = test::HttpBody(*response);
  const test::Result parsed = test::ParsePrometheus(page);
  ASSERT_EQ(parsed.code, 0) << parsed.err << "\n" << page;
  // 5 locks, the other owner's attempt, and the leader.
  for (const char* sample : {
           "dlock_acquire_attempts_total namespace=default 7.0\n",
           "dlock_acquire_grants_total namespace=default 6.0\n",
           "dlock_acquire_failures_total "
           "code=deadline_exceeded,namespace=default 1.0\n",
           "dlock_releases_total namespace=default,result=confirmed 5.0\n",
           "dlock_hold_seconds_count namespace=default 5.0\n",
           "dlock_backend_call_seconds_count "
           "namespace=default,operation=acquire 7.0\n",
           "dlock_holds_held namespace=default 1.0\n",
       }) {
    EXPECT_TRUE(absl::StrContains(parsed.out, sample)) << sample << "\n"
                                                       << parsed.out;
  }
  example.Signal(SIGTERM);
  EXPECT_EQ(example.Wait(absl::Seconds(30)), 0) << example.err();
}

}  // namespace
}  // namespace dlock
