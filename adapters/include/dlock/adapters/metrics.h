// Copyright dlock authors. Lock metrics in the Prometheus text exposition
// format (version 0.0.4), written here because Debian 12 packages no C++
// Prometheus client. A LockObserver (dlock/observer.h):
//
//   auto metrics = std::make_shared<dlock::PrometheusMetrics>();
//   dlock::ClientOptions options;
//   options.observer = metrics;       // as many clients as you like
//   auto client = dlock::Connect(uri, options);
//   ...
//   std::string page = metrics->RenderText();  // serve it on /metrics
//
// dlock/adapters/metrics_http.h serves RenderText() over HTTP; so does
// `dlock monitor`.
//
// Metrics are per namespace, never per lock name, so the number of series
// stays bounded however many locks there are. Every label other than
// `namespace` takes values from a small closed set:
//
//   dlock_acquire_attempts_total{namespace}                counter
//   dlock_acquire_grants_total{namespace}                  counter
//   dlock_acquire_failures_total{namespace,code}           counter
//       code: the absl status code in lower case ("deadline_exceeded":
//       held by another or the wait expired, "cancelled", "unavailable",
//       "failed_precondition": client closed, "invalid_argument"...)
//   dlock_acquire_wait_seconds{namespace}                  histogram
//       from the start of Acquire() to the grant, granted calls only
//   dlock_hold_seconds{namespace}                          histogram
//       from each acquisition's grant to its release
//   dlock_releases_total{namespace,result}                 counter
//       result: "confirmed", "unconfirmed" (given up and retried in the
//       background, C21), "kept" (left to run out with its lease)
//   dlock_renewals_total{namespace,result}                 counter
//       result: "ok", "failed" (transient, retried), "gone"
//   dlock_losses_total{namespace,cause}                    counter
//       cause: "gone", "unconfirmed", "lease_ended", "client_closed"
//   dlock_release_failures_total{namespace,stage}          counter
//       stage: "caller", "background", "close"
//   dlock_backend_call_seconds{namespace,operation}        histogram
//       operation: "acquire" (waiting included), "release", "renew" (a
//       watchdog batch counts once), "inspect", "list", "force_unlock",
//       "server_memory"
//   dlock_backend_call_errors_total{namespace,operation,code}  counter
//   dlock_holds_held{namespace}                            gauge
//       holds (lock, owner) believed held now by the clients observed
//
// Series with a `code` label appear once their count is above zero; the
// others appear, at zero, as soon as the namespace has had an event.
//
// Thread safety: every method may be called from any thread at once. An
// event costs a few relaxed atomic additions, and finding its namespace: a
// string comparison with the namespace the thread's last event had, else a
// shared lock and a hash lookup (an exclusive lock the first time a
// namespace is seen).
#ifndef DLOCK_ADAPTERS_METRICS_H_
#define DLOCK_ADAPTERS_METRICS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "dlock/observer.h"

namespace dlock {

class PrometheusMetrics : public LockObserver {
 public:
  // What RenderText() is, for an HTTP Content-Type header.
  static constexpr absl::string_view kContentType =
      "text/plain; version=0.0.4; charset=utf-8";

  PrometheusMetrics();
  ~PrometheusMetrics() override;
  PrometheusMetrics(const PrometheusMetrics&) = delete;
  PrometheusMetrics& operator=(const PrometheusMetrics&) = delete;

  void OnAcquireAttempt(const AcquireAttemptEvent& event) override;
  void OnGrant(const GrantEvent& event) override;
  void OnAcquireFailed(const AcquireFailedEvent& event) override;
  void OnRelease(const ReleaseEvent& event) override;
  void OnRenewal(const RenewalEvent& event) override;
  void OnLoss(const LossEvent& event) override;
  void OnReleaseFailure(const ReleaseFailureEvent& event) override;
  void OnBackendCall(const BackendCallEvent& event) override;

  // Every metric of every namespace seen so far, in the text exposition
  // format 0.0.4 (# HELP and # TYPE once per metric, namespaces in
  // lexicographic order). Safe to call while events arrive; each number is
  // read atomically, not the page as a whole.
  std::string RenderText() const;

 private:
  struct Namespace;  // its counters and histograms; see metrics.cc

  Namespace& For(absl::string_view lock_namespace);
  Namespace& Find(absl::string_view lock_namespace);

  const uint64_t id_;  // for For()'s per-thread cache

  mutable absl::Mutex mu_;
  // Entries are never removed, so a reference stays valid after mu_ is let
  // go.
  absl::flat_hash_map<std::string, std::unique_ptr<Namespace>> namespaces_
      ABSL_GUARDED_BY(mu_);
};

// A label value as the text format writes it: backslash, double quote and
// line feed escaped as \\, \" and \n.
std::string EscapePrometheusLabelValue(absl::string_view value);

}  // namespace dlock

#endif  // DLOCK_ADAPTERS_METRICS_H_
