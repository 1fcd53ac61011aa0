// PrometheusMetrics (dlock/adapters/metrics.h): the exact text for known
// events, label escaping, the reference parser's reading of a page, and
// counts under concurrent events from several clients.
#include "dlock/adapters/metrics.h"

#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "metrics_testing.h"
#include "status_testing.h"

namespace dlock {
namespace {

// The lines of one metric family: its # HELP, # TYPE and samples.
std::string FamilyText(const std::string& page, absl::string_view name) {
  std::string out;
  bool in = false;
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (absl::StartsWith(line, "# HELP ")) {
      in = absl::StartsWith(line, absl::StrCat("# HELP ", name, " "));
    }
    if (in && !line.empty()) absl::StrAppend(&out, line, "\n");
  }
  return out;
}

void Grant(PrometheusMetrics& m, absl::string_view ns, absl::Duration waited,
           bool fresh = true) {
  m.OnAcquireAttempt({.lock_namespace = ns, .name = "l", .owner = "o"});
  m.OnGrant({.lock_namespace = ns,
             .name = "l",
             .owner = "o",
             .fencing_token = 1,
             .hold_count = 1,
             .fresh = fresh,
             .waited = waited});
}

TEST(PrometheusMetrics, WaitHistogramIsCumulativeWithExactSumAndCount) {
  PrometheusMetrics m;
  Grant(m, "a", absl::Seconds(1));  // on a bound: le is inclusive
  Grant(m, "a", absl::Milliseconds(200));
  Grant(m, "a", absl::Seconds(400));  // past every bound
  EXPECT_EQ(
      FamilyText(m.RenderText(), "dlock_acquire_wait_seconds"),
      R"(# HELP dlock_acquire_wait_seconds Time from the start of Acquire() to the grant.
# TYPE dlock_acquire_wait_seconds histogram
dlock_acquire_wait_seconds_bucket{namespace="a",le="0.001"} 0
dlock_acquire_wait_seconds_bucket{namespace="a",le="0.005"} 0
dlock_acquire_wait_seconds_bucket{namespace="a",le="0.01"} 0
dlock_acquire_wait_seconds_bucket{namespace="a",le="0.05"} 0
dlock_acquire_wait_seconds_bucket{namespace="a",le="0.1"} 0
dlock_acquire_wait_seconds_bucket{namespace="a",le="0.5"} 1
dlock_acquire_wait_seconds_bucket{namespace="a",le="1"} 2
dlock_acquire_wait_seconds_bucket{namespace="a",le="5"} 2
dlock_acquire_wait_seconds_bucket{namespace="a",le="10"} 2
dlock_acquire_wait_seconds_bucket{namespace="a",le="30"} 2
dlock_acquire_wait_seconds_bucket{namespace="a",le="60"} 2
dlock_acquire_wait_seconds_bucket{namespace="a",le="300"} 2
dlock_acquire_wait_seconds_bucket{namespace="a",le="+Inf"} 3
dlock_acquire_wait_seconds_sum{namespace="a"} 401.2
dlock_acquire_wait_seconds_count{namespace="a"} 3
)");
}

TEST(PrometheusMetrics, CountersPerNamespaceInOrderWithClosedLabelSets) {
  PrometheusMetrics m;
  Grant(m, "zeta", absl::ZeroDuration());
  Grant(m, "alpha", absl::ZeroDuration());
  Grant(m, "alpha", absl::ZeroDuration(), /*fresh=*/false);  // re-entry
  const absl::Status unavailable = absl::UnavailableError("x");
  const absl::Status ok;
  m.OnRelease({.lock_namespace = "alpha",
               .held = absl::Seconds(2),
               .last = false,
               .result = ok});
  m.OnRelease({.lock_namespace = "alpha",
               .held = absl::Seconds(3),
               .last = true,
               .result = unavailable});
  m.OnReleaseFailure({.lock_namespace = "alpha",
                      .stage = ReleaseFailureEvent::Stage::kCaller,
                      .error = unavailable});
  const absl::Status gone = absl::FailedPreconditionError("gone");
  m.OnRenewal({.lock_namespace = "zeta", .by_watchdog = true, .result = ok});
  m.OnRenewal({.lock_namespace = "zeta", .by_watchdog = true, .result = gone});
  m.OnLoss({.lock_namespace = "zeta",
            .cause = LossCause::kGone,
            .reason = gone,
            .held = absl::Seconds(1)});
  const absl::Status held = absl::DeadlineExceededError("held");
  m.OnAcquireFailed({.lock_namespace = "zeta", .error = held});
  m.OnBackendCall({.lock_namespace = "zeta",
                   .operation = BackendOperation::kRenew,
                   .latency = absl::Microseconds(300),
                   .code = absl::StatusCode::kFailedPrecondition});
  const std::string page = m.RenderText();

  EXPECT_EQ(FamilyText(page, "dlock_acquire_attempts_total"),
            R"(# HELP dlock_acquire_attempts_total Acquire() calls started.
# TYPE dlock_acquire_attempts_total counter
dlock_acquire_attempts_total{namespace="alpha"} 2
dlock_acquire_attempts_total{namespace="zeta"} 1
)");
  EXPECT_EQ(
      FamilyText(page, "dlock_acquire_failures_total"),
      R"(# HELP dlock_acquire_failures_total Acquire() calls that failed, by status code.
# TYPE dlock_acquire_failures_total counter
dlock_acquire_failures_total{namespace="zeta",code="deadline_exceeded"} 1
)");
  EXPECT_EQ(
      FamilyText(page, "dlock_releases_total"),
      R"(# HELP dlock_releases_total Acquisitions released, by the backend's answer.
# TYPE dlock_releases_total counter
dlock_releases_total{namespace="alpha",result="confirmed"} 1
dlock_releases_total{namespace="alpha",result="unconfirmed"} 1
dlock_releases_total{namespace="alpha",result="kept"} 0
dlock_releases_total{namespace="zeta",result="confirmed"} 0
dlock_releases_total{namespace="zeta",result="unconfirmed"} 0
dlock_releases_total{namespace="zeta",result="kept"} 0
)");
  EXPECT_EQ(FamilyText(page, "dlock_renewals_total"),
            R"(# HELP dlock_renewals_total Lease renewals, by result.
# TYPE dlock_renewals_total counter
dlock_renewals_total{namespace="alpha",result="ok"} 0
dlock_renewals_total{namespace="alpha",result="failed"} 0
dlock_renewals_total{namespace="alpha",result="gone"} 0
dlock_renewals_total{namespace="zeta",result="ok"} 1
dlock_renewals_total{namespace="zeta",result="failed"} 0
dlock_renewals_total{namespace="zeta",result="gone"} 1
)");
  EXPECT_EQ(
      FamilyText(page, "dlock_losses_total"),
      R"(# HELP dlock_losses_total Holds lost while believed held, by cause.
# TYPE dlock_losses_total counter
dlock_losses_total{namespace="alpha",cause="gone"} 0
dlock_losses_total{namespace="alpha",cause="unconfirmed"} 0
dlock_losses_total{namespace="alpha",cause="lease_ended"} 0
dlock_losses_total{namespace="alpha",cause="client_closed"} 0
dlock_losses_total{namespace="zeta",cause="gone"} 1
dlock_losses_total{namespace="zeta",cause="unconfirmed"} 0
dlock_losses_total{namespace="zeta",cause="lease_ended"} 0
dlock_losses_total{namespace="zeta",cause="client_closed"} 0
)");
  EXPECT_EQ(
      FamilyText(page, "dlock_release_failures_total"),
      R"(# HELP dlock_release_failures_total Releases the backend did not confirm, where no caller got the error.
# TYPE dlock_release_failures_total counter
dlock_release_failures_total{namespace="alpha",stage="caller"} 1
dlock_release_failures_total{namespace="alpha",stage="background"} 0
dlock_release_failures_total{namespace="alpha",stage="close"} 0
dlock_release_failures_total{namespace="zeta",stage="caller"} 0
dlock_release_failures_total{namespace="zeta",stage="background"} 0
dlock_release_failures_total{namespace="zeta",stage="close"} 0
)");
  EXPECT_EQ(
      FamilyText(page, "dlock_backend_call_errors_total"),
      R"(# HELP dlock_backend_call_errors_total Round trips to the backend that failed, by operation and status code.
# TYPE dlock_backend_call_errors_total counter
dlock_backend_call_errors_total{namespace="zeta",operation="renew",code="failed_precondition"} 1
)");
  // alpha: two fresh grants... one fresh and one re-entry, then its last
  // release; zeta: one fresh grant, then its loss.
  EXPECT_EQ(FamilyText(page, "dlock_holds_held"),
            R"(# HELP dlock_holds_held Holds (lock and owner) believed held now.
# TYPE dlock_holds_held gauge
dlock_holds_held{namespace="alpha"} 0
dlock_holds_held{namespace="zeta"} 0
)");
  EXPECT_TRUE(absl::StrContains(
      page,
      "dlock_hold_seconds_bucket{namespace=\"alpha\",le=\"1\"} 0\n"
      "dlock_hold_seconds_bucket{namespace=\"alpha\",le=\"10\"} 2\n"))
      << page;
  EXPECT_TRUE(absl::StrContains(
      page,
      "dlock_backend_call_seconds_bucket{namespace=\"zeta\",operation="
      "\"renew\",le=\"0.00025\"} 0\n"
      "dlock_backend_call_seconds_bucket{namespace=\"zeta\",operation="
      "\"renew\",le=\"0.0005\"} 1\n"))
      << page;
  EXPECT_TRUE(absl::StrContains(page,
                                "dlock_backend_call_seconds_sum{namespace="
                                "\"zeta\",operation=\"renew\"} 0.0003\n"))
      << page;
}

TEST(PrometheusMetrics, LabelValuesAreEscaped) {
  EXPECT_EQ(EscapePrometheusLabelValue(R"(a"b\c)"
                                       "\n"
                                       "d"),
            R"(a\"b\\c\nd)");
  PrometheusMetrics m;
  m.OnAcquireAttempt({.lock_namespace = "q\"b\\s\nl"});
  EXPECT_TRUE(absl::StrContains(
      m.RenderText(),
      "dlock_acquire_attempts_total{namespace=\"q\\\"b\\\\s\\nl\"} 1\n"));
}

TEST(PrometheusMetrics, EmptyRegistryRendersHeadersOnly) {
  PrometheusMetrics m;
  const std::string page = m.RenderText();
  for (absl::string_view line : absl::StrSplit(page, '\n', absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(line, "# ")) << line;
  }
  EXPECT_EQ(test::ParsePrometheus(page).code, 0);
}

TEST(PrometheusMetrics, TheReferenceParserReadsEveryFamily) {
  PrometheusMetrics m;
  Grant(m, "a", absl::Milliseconds(3));
  const absl::Status ok;
  m.OnRelease({.lock_namespace = "a",
               .held = absl::Milliseconds(1500),
               .last = true,
               .result = ok});
  m.OnBackendCall({.lock_namespace = "a",
                   .operation = BackendOperation::kAcquire,
                   .latency = absl::Microseconds(120),
                   .code = absl::StatusCode::kUnavailable});
  m.OnAcquireAttempt({.lock_namespace = "we\"ird\\"});
  const test::Result parsed = test::ParsePrometheus(m.RenderText());
  ASSERT_EQ(parsed.code, 0) << parsed.err << "\n" << m.RenderText();
  // The parser names counters without _total.
  for (const char* family :
       {"# dlock_acquire_attempts counter", "# dlock_acquire_grants counter",
        "# dlock_acquire_failures counter",
        "# dlock_acquire_wait_seconds histogram",
        "# dlock_hold_seconds histogram", "# dlock_releases counter",
        "# dlock_renewals counter", "# dlock_losses counter",
        "# dlock_release_failures counter",
        "# dlock_backend_call_seconds histogram",
        "# dlock_backend_call_errors counter", "# dlock_holds_held gauge"}) {
    EXPECT_TRUE(absl::StrContains(parsed.out, absl::StrCat(family, "\n")))
        << family << "\n"
        << parsed.out;
  }
  for (const char* sample : {
           "dlock_acquire_wait_seconds_bucket le=0.005,namespace=a 1.0\n",
           "dlock_acquire_wait_seconds_sum namespace=a 0.003\n",
           "dlock_hold_seconds_bucket le=1,namespace=a 0.0\n",
           "dlock_hold_seconds_bucket le=10,namespace=a 1.0\n",
           "dlock_backend_call_errors_total "
           "code=unavailable,namespace=a,operation=acquire 1.0\n",
           "dlock_acquire_attempts_total namespace=we\"ird\\ 1.0\n",
       }) {
    EXPECT_TRUE(absl::StrContains(parsed.out, sample)) << sample << "\n"
                                                       << parsed.out;
  }
}

// One registry for many clients: each client's events land in its own
// namespace's series.
TEST(PrometheusMetrics, OneRegistryServesSeveralClients) {
  auto metrics = std::make_shared<PrometheusMetrics>();
  std::vector<std::unique_ptr<LockClient>> clients;
  for (const char* ns : {"billing", "billing", "search"}) {
    ClientOptions options;
    options.observer = metrics;
    options.lock_namespace = ns;
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        Connect("memory://metrics-several", options);
    ASSERT_OK(client);
    clients.push_back(*std::move(client));
  }
  for (auto& client : clients) {
    std::unique_ptr<DistributedLock> lock = *client->GetLock("report");
    absl::StatusOr<Hold> hold = lock->Acquire({.wait = absl::Seconds(10)});
    ASSERT_OK(hold);
    ASSERT_OK(hold->Release());
  }
  const std::string page = metrics->RenderText();
  EXPECT_TRUE(absl::StrContains(
      page, "dlock_acquire_grants_total{namespace=\"billing\"} 2\n"))
      << page;
  EXPECT_TRUE(absl::StrContains(
      page, "dlock_acquire_grants_total{namespace=\"search\"} 1\n"))
      << page;
  EXPECT_TRUE(absl::StrContains(
      page,
      "dlock_releases_total{namespace=\"billing\",result=\"confirmed\"} 2\n"));
  EXPECT_TRUE(absl::StrContains(
      page,
      "dlock_backend_call_seconds_count{namespace=\"search\",operation="
      "\"acquire\"} 1\n"));
  EXPECT_TRUE(
      absl::StrContains(page, "dlock_holds_held{namespace=\"billing\"} 0\n"));
}

// A thread remembers the namespace its last event found: a registry made
// after another (perhaps at the same address) must not inherit it.
TEST(PrometheusMetrics, EachRegistryCountsOnlyItsOwnEvents) {
  for (int i = 0; i < 3; ++i) {
    auto m = std::make_unique<PrometheusMetrics>();
    m->OnAcquireAttempt({.lock_namespace = "same"});
    m->OnAcquireAttempt({.lock_namespace = "same"});
    EXPECT_TRUE(absl::StrContains(
        m->RenderText(),
        "dlock_acquire_attempts_total{namespace=\"same\"} 2\n"))
        << m->RenderText();
  }
  PrometheusMetrics a;
  PrometheusMetrics b;
  a.OnAcquireAttempt({.lock_namespace = "x"});
  b.OnAcquireAttempt({.lock_namespace = "x"});
  a.OnAcquireAttempt({.lock_namespace = "x"});
  EXPECT_TRUE(absl::StrContains(
      a.RenderText(), "dlock_acquire_attempts_total{namespace=\"x\"} 2\n"));
  EXPECT_TRUE(absl::StrContains(
      b.RenderText(), "dlock_acquire_attempts_total{namespace=\"x\"} 1\n"));
}

TEST(PrometheusMetrics, CountsEveryEventFromConcurrentThreads) {
  PrometheusMetrics m;
  constexpr int kThreads = 8;
  constexpr int kEach = 5000;
  std::vector<std::thread> threads;
  std::atomic<bool> done{false};
  std::thread renderer([&] {
    while (!done.load()) m.RenderText();
  });
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&m, t] {
      const std::string ns = absl::StrCat("ns", t % 3);
      for (int i = 0; i < kEach; ++i) {
        Grant(m, ns, absl::Microseconds(i));
        m.OnBackendCall({.lock_namespace = ns,
                         .operation = BackendOperation::kRelease,
                         .latency = absl::Nanoseconds(1)});
      }
    });
  }
  for (std::thread& t : threads) t.join();
  done = true;
  renderer.join();
  const std::string page = m.RenderText();
  // Threads 0, 3, 6 -> ns0; 1, 4, 7 -> ns1; 2, 5 -> ns2.
  for (const auto& [ns, threads_of_ns] :
       {std::pair{"ns0", 3}, std::pair{"ns1", 3}, std::pair{"ns2", 2}}) {
    const int n = threads_of_ns * kEach;
    EXPECT_TRUE(absl::StrContains(
        page, absl::StrCat("dlock_acquire_grants_total{namespace=\"", ns,
                           "\"} ", n, "\n")))
        << ns;
    EXPECT_TRUE(absl::StrContains(
        page, absl::StrCat("dlock_acquire_wait_seconds_bucket{namespace=\"", ns,
                           "\",le=\"+Inf\"} ", n, "\n")));
    EXPECT_TRUE(absl::StrContains(
        page, absl::StrCat("dlock_backend_call_seconds_count{namespace=\"", ns,
                           "\",operation=\"release\"} ", n, "\n")));
    EXPECT_TRUE(absl::StrContains(
        page,
        absl::StrCat("dlock_holds_held{namespace=\"", ns, "\"} ", n, "\n")));
  }
}

}  // namespace
}  // namespace dlock
