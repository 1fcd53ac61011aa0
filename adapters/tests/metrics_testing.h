// Copyright dlock authors. For the metrics tests: a raw HTTP client over TCP
// and the reference Prometheus parser.
#ifndef DLOCK_ADAPTERS_TESTS_METRICS_TESTING_H_
#define DLOCK_ADAPTERS_TESTS_METRICS_TESTING_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "test_util.h"

namespace dlock::test {

// Sends `request` as is to 127.0.0.1:`port` and returns everything the
// server sends until it closes the connection (10 s at most).
absl::StatusOr<std::string> HttpExchange(int port, absl::string_view request);
// A GET of `path`.
absl::StatusOr<std::string> HttpGet(int port, absl::string_view path);

// The body of an HTTP response (after the empty line).
std::string HttpBody(absl::string_view response);

// Runs adapters/tests/parse_prometheus.py (the python3-prometheus-client
// parser) on `page`: code 0 and one line per sample ("name labels value")
// when it parses.
Result ParsePrometheus(const std::string& page);

}  // namespace dlock::test

#endif  // DLOCK_ADAPTERS_TESTS_METRICS_TESTING_H_
