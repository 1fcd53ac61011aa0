#include "dlock/adapters/metrics.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"

namespace dlock {
namespace {

// Status codes 0 (OK) to 16 (UNAUTHENTICATED): absl's closed set.
constexpr int kCodeCount = 17;

// Bucket bounds in seconds. Backend round trips: a local Redis answers in
// about 100us, a remote quorum in milliseconds; a blocked acquire in
// seconds. Waits: a free lock at once, a busy one for minutes. Holds: a
// critical section of milliseconds to a batch job of hours.
constexpr double kLatencyBounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                     0.005,  0.01,    0.025,  0.05,  0.1,
                                     0.25,   0.5,     1,      2.5,   10};
constexpr double kWaitBounds[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5,
                                  1,     5,     10,   30,   60,  300};
constexpr double kHoldBounds[] = {0.01, 0.1, 1, 10, 60, 300, 900, 3600, 14400};

using Counter = std::atomic<uint64_t>;

void Add(Counter& counter) { counter.fetch_add(1, std::memory_order_relaxed); }
uint64_t Read(const Counter& counter) {
  return counter.load(std::memory_order_relaxed);
}

int CodeIndex(absl::StatusCode code) {
  const int i = static_cast<int>(code);
  return i >= 0 && i < kCodeCount
             ? i
             : static_cast<int>(absl::StatusCode::kUnknown);
}

std::string CodeName(int index) {
  return absl::AsciiStrToLower(
      absl::StatusCodeToString(static_cast<absl::StatusCode>(index)));
}

// Non-cumulative counts per bucket (the last one past every bound): each
// event touches one counter, and a page sums them, so +Inf always equals
// _count.
class Histogram {
 public:
  explicit Histogram(absl::Span<const double> bounds)
      : bounds_(bounds), counts_(bounds.size() + 1) {}

  void Observe(absl::Duration d) {
    const double seconds = absl::ToDoubleSeconds(d);
    const size_t i =
        std::lower_bound(bounds_.begin(), bounds_.end(), seconds) -
        bounds_.begin();  // le: a value equal to a bound is in its bucket
    Add(counts_[i]);
    sum_nanos_.fetch_add(absl::ToInt64Nanoseconds(d),
                         std::memory_order_relaxed);
  }

  absl::Span<const double> bounds() const { return bounds_; }
  uint64_t count(size_t bucket) const { return Read(counts_[bucket]); }
  int64_t sum_nanos() const {
    return sum_nanos_.load(std::memory_order_relaxed);
  }

 private:
  const absl::Span<const double> bounds_;
  std::vector<Counter> counts_;
  std::atomic<int64_t> sum_nanos_{0};
};

enum ReleaseResult { kConfirmed, kUnconfirmed, kKept, kReleaseResultCount };
constexpr const char* kReleaseResultNames[] = {"confirmed", "unconfirmed",
                                               "kept"};
enum RenewalResult { kRenewOk, kRenewFailed, kRenewGone, kRenewResultCount };
constexpr const char* kRenewalResultNames[] = {"ok", "failed", "gone"};
constexpr LossCause kLossCauses[] = {LossCause::kGone, LossCause::kUnconfirmed,
                                     LossCause::kLeaseEnded,
                                     LossCause::kClientClosed};
constexpr ReleaseFailureEvent::Stage kStages[] = {
    ReleaseFailureEvent::Stage::kCaller,
    ReleaseFailureEvent::Stage::kBackground,
    ReleaseFailureEvent::Stage::kClose};

}  // namespace

struct PrometheusMetrics::Namespace {
  Counter attempts{0};
  Counter grants{0};
  std::array<Counter, kCodeCount> acquire_failures{};
  Histogram wait{kWaitBounds};
  Histogram hold{kHoldBounds};
  std::array<Counter, kReleaseResultCount> releases{};
  std::array<Counter, kRenewResultCount> renewals{};
  std::array<Counter, std::size(kLossCauses)> losses{};
  std::array<Counter, std::size(kStages)> release_failures{};
  std::array<Histogram, kBackendOperationCount> backend_calls{
      Histogram(kLatencyBounds), Histogram(kLatencyBounds),
      Histogram(kLatencyBounds), Histogram(kLatencyBounds),
      Histogram(kLatencyBounds), Histogram(kLatencyBounds),
      Histogram(kLatencyBounds), Histogram(kLatencyBounds)};
  std::array<std::array<Counter, kCodeCount>, kBackendOperationCount>
      backend_errors{};
  std::atomic<int64_t> holds{0};
};

namespace {
// Tells registries apart in the per-thread cache below, even one made at
// the address of a destroyed one.
std::atomic<uint64_t> next_registry_id{1};
}  // namespace

PrometheusMetrics::PrometheusMetrics()
    : id_(next_registry_id.fetch_add(1, std::memory_order_relaxed)) {}
PrometheusMetrics::~PrometheusMetrics() = default;

PrometheusMetrics::Namespace& PrometheusMetrics::For(
    absl::string_view lock_namespace) {
  // A thread's events mostly come from one client, so one namespace: the
  // last one found spares the shared lock and the hash. Entries are never
  // removed, so the pointer is good while the registry (same id) lives.
  struct Last {
    uint64_t registry = 0;
    std::string lock_namespace;
    Namespace* found = nullptr;
  };
  thread_local Last last;
  if (last.registry == id_ && last.lock_namespace == lock_namespace) {
    return *last.found;
  }
  Namespace& found = Find(lock_namespace);
  last.registry = id_;
  last.lock_namespace.assign(lock_namespace.data(), lock_namespace.size());
  last.found = &found;
  return found;
}

PrometheusMetrics::Namespace& PrometheusMetrics::Find(
    absl::string_view lock_namespace) {
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = namespaces_.find(lock_namespace);
    if (it != namespaces_.end()) return *it->second;
  }
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Namespace>& entry = namespaces_[lock_namespace];
  if (entry == nullptr) entry = std::make_unique<Namespace>();
  return *entry;
}

void PrometheusMetrics::OnAcquireAttempt(const AcquireAttemptEvent& event) {
  Add(For(event.lock_namespace).attempts);
}

void PrometheusMetrics::OnGrant(const GrantEvent& event) {
  Namespace& ns = For(event.lock_namespace);
  Add(ns.grants);
  ns.wait.Observe(event.waited);
  if (event.fresh) ns.holds.fetch_add(1, std::memory_order_relaxed);
}

void PrometheusMetrics::OnAcquireFailed(const AcquireFailedEvent& event) {
  Add(For(event.lock_namespace)
          .acquire_failures[CodeIndex(event.error.code())]);
}

void PrometheusMetrics::OnRelease(const ReleaseEvent& event) {
  Namespace& ns = For(event.lock_namespace);
  ns.hold.Observe(event.held);
  Add(ns.releases[event.kept_until_lease_end ? kKept
                  : event.result.ok()        ? kConfirmed
                                             : kUnconfirmed]);
  if (event.last) ns.holds.fetch_sub(1, std::memory_order_relaxed);
}

void PrometheusMetrics::OnRenewal(const RenewalEvent& event) {
  const absl::StatusCode code = event.result.code();
  Add(For(event.lock_namespace)
          .renewals[code == absl::StatusCode::kOk ? kRenewOk
                    : code == absl::StatusCode::kFailedPrecondition ||
                            code == absl::StatusCode::kNotFound
                        ? kRenewGone
                        : kRenewFailed]);
}

void PrometheusMetrics::OnLoss(const LossEvent& event) {
  Namespace& ns = For(event.lock_namespace);
  const size_t cause =
      std::find(std::begin(kLossCauses), std::end(kLossCauses), event.cause) -
      std::begin(kLossCauses);
  if (cause < ns.losses.size()) Add(ns.losses[cause]);
  ns.holds.fetch_sub(1, std::memory_order_relaxed);
}

void PrometheusMetrics::OnReleaseFailure(const ReleaseFailureEvent& event) {
  Namespace& ns = For(event.lock_namespace);
  const size_t stage =
      std::find(std::begin(kStages), std::end(kStages), event.stage) -
      std::begin(kStages);
  if (stage < ns.release_failures.size()) Add(ns.release_failures[stage]);
}

void PrometheusMetrics::OnBackendCall(const BackendCallEvent& event) {
  const int op = static_cast<int>(event.operation);
  if (op < 0 || op >= kBackendOperationCount) return;
  Namespace& ns = For(event.lock_namespace);
  ns.backend_calls[op].Observe(event.latency);
  if (event.code != absl::StatusCode::kOk) {
    Add(ns.backend_errors[op][CodeIndex(event.code)]);
  }
}

std::string EscapePrometheusLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

// Exact decimal seconds from nanoseconds: "0", "0.5", "12.000000123".
std::string FormatSeconds(int64_t nanos) {
  const bool negative = nanos < 0;
  const uint64_t n = negative ? 0 - static_cast<uint64_t>(nanos) : nanos;
  std::string text = absl::StrCat(negative ? "-" : "", n / 1000000000);
  if (const uint64_t frac = n % 1000000000; frac != 0) {
    std::string digits = absl::StrFormat("%09d", frac);
    digits.erase(digits.find_last_not_of('0') + 1);
    absl::StrAppend(&text, ".", digits);
  }
  return text;
}

// One page under construction: a family's header once, then its samples.
class Page {
 public:
  void Family(absl::string_view name, absl::string_view type,
              absl::string_view help) {
    absl::StrAppend(&text_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ",
                    type, "\n");
  }
  // `labels`: name/value pairs, values unescaped.
  template <typename Number>
  void Sample(
      absl::string_view name,
      std::initializer_list<std::pair<absl::string_view, absl::string_view>>
          labels,
      Number value) {
    absl::StrAppend(&text_, name, "{");
    bool first = true;
    for (const auto& [label, label_value] : labels) {
      absl::StrAppend(&text_, first ? "" : ",", label, "=\"",
                      EscapePrometheusLabelValue(label_value), "\"");
      first = false;
    }
    absl::StrAppend(&text_, "} ", value, "\n");
  }
  void AddHistogram(absl::string_view name, absl::string_view ns,
                    absl::string_view extra_label,
                    absl::string_view extra_value, const Histogram& h) {
    const std::string bucket = absl::StrCat(name, "_bucket");
    uint64_t cumulative = 0;
    auto labels_le = [&](absl::string_view le, uint64_t value) {
      if (extra_label.empty()) {
        Sample(bucket, {{"namespace", ns}, {"le", le}}, value);
      } else {
        Sample(bucket,
               {{"namespace", ns}, {extra_label, extra_value}, {"le", le}},
               value);
      }
    };
    for (size_t i = 0; i < h.bounds().size(); ++i) {
      cumulative += h.count(i);
      labels_le(absl::StrCat(h.bounds()[i]), cumulative);
    }
    cumulative += h.count(h.bounds().size());
    labels_le("+Inf", cumulative);
    const std::string sum = FormatSeconds(h.sum_nanos());
    if (extra_label.empty()) {
      Sample(absl::StrCat(name, "_sum"), {{"namespace", ns}}, sum);
      Sample(absl::StrCat(name, "_count"), {{"namespace", ns}}, cumulative);
    } else {
      Sample(absl::StrCat(name, "_sum"),
             {{"namespace", ns}, {extra_label, extra_value}}, sum);
      Sample(absl::StrCat(name, "_count"),
             {{"namespace", ns}, {extra_label, extra_value}}, cumulative);
    }
  }
  std::string Take() { return std::move(text_); }

 private:
  std::string text_;
};

}  // namespace

std::string PrometheusMetrics::RenderText() const {
  std::vector<std::pair<absl::string_view, const Namespace*>> all;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [name, ns] : namespaces_) all.emplace_back(name, ns.get());
  }
  std::sort(all.begin(), all.end());
  Page page;
  auto counter = [&](absl::string_view name, absl::string_view help,
                     Counter Namespace::*field) {
    page.Family(name, "counter", help);
    for (const auto& [ns, m] : all) {
      page.Sample(name, {{"namespace", ns}}, Read(m->*field));
    }
  };
  counter("dlock_acquire_attempts_total", "Acquire() calls started.",
          &Namespace::attempts);
  counter("dlock_acquire_grants_total", "Acquire() calls that returned a hold.",
          &Namespace::grants);

  page.Family("dlock_acquire_failures_total", "counter",
              "Acquire() calls that failed, by status code.");
  for (const auto& [ns, m] : all) {
    for (int code = 0; code < kCodeCount; ++code) {
      if (const uint64_t n = Read(m->acquire_failures[code]); n > 0) {
        page.Sample("dlock_acquire_failures_total",
                    {{"namespace", ns}, {"code", CodeName(code)}}, n);
      }
    }
  }

  page.Family("dlock_acquire_wait_seconds", "histogram",
              "Time from the start of Acquire() to the grant.");
  for (const auto& [ns, m] : all) {
    page.AddHistogram("dlock_acquire_wait_seconds", ns, "", "", m->wait);
  }
  page.Family("dlock_hold_seconds", "histogram",
              "Time from an acquisition's grant to its release.");
  for (const auto& [ns, m] : all) {
    page.AddHistogram("dlock_hold_seconds", ns, "", "", m->hold);
  }

  auto by_label = [&](absl::string_view name, absl::string_view help,
                      absl::string_view label, auto names, auto field) {
    page.Family(name, "counter", help);
    for (const auto& [ns, m] : all) {
      const auto& counters = m->*field;
      for (size_t i = 0; i < counters.size(); ++i) {
        page.Sample(name, {{"namespace", ns}, {label, names(i)}},
                    Read(counters[i]));
      }
    }
  };
  by_label(
      "dlock_releases_total", "Acquisitions released, by the backend's answer.",
      "result", [](size_t i) { return kReleaseResultNames[i]; },
      &Namespace::releases);
  by_label(
      "dlock_renewals_total", "Lease renewals, by result.", "result",
      [](size_t i) { return kRenewalResultNames[i]; }, &Namespace::renewals);
  by_label(
      "dlock_losses_total", "Holds lost while believed held, by cause.",
      "cause", [](size_t i) { return LossCauseName(kLossCauses[i]); },
      &Namespace::losses);
  by_label(
      "dlock_release_failures_total",
      "Releases the backend did not confirm, where no caller got the error.",
      "stage", [](size_t i) { return ReleaseFailureStageName(kStages[i]); },
      &Namespace::release_failures);

  page.Family("dlock_backend_call_seconds", "histogram",
              "Round trips to the backend, by operation.");
  for (const auto& [ns, m] : all) {
    for (int op = 0; op < kBackendOperationCount; ++op) {
      page.AddHistogram("dlock_backend_call_seconds", ns, "operation",
                        BackendOperationName(static_cast<BackendOperation>(op)),
                        m->backend_calls[op]);
    }
  }
  page.Family("dlock_backend_call_errors_total", "counter",
              "Round trips to the backend that failed, by operation and "
              "status code.");
  for (const auto& [ns, m] : all) {
    for (int op = 0; op < kBackendOperationCount; ++op) {
      for (int code = 0; code < kCodeCount; ++code) {
        if (const uint64_t n = Read(m->backend_errors[op][code]); n > 0) {
          page.Sample("dlock_backend_call_errors_total",
                      {{"namespace", ns},
                       {"operation", BackendOperationName(
                                         static_cast<BackendOperation>(op))},
                       {"code", CodeName(code)}},
                      n);
        }
      }
    }
  }

  page.Family("dlock_holds_held", "gauge",
              "Holds (lock and owner) believed held now.");
  for (const auto& [ns, m] : all) {
    page.Sample("dlock_holds_held", {{"namespace", ns}},
                m->holds.load(std::memory_order_relaxed));
  }
  return page.Take();
}

}  // namespace dlock
