// Copyright dlock authors. Reads `dlock bench --json` output in tests: one
// record per line after the header, flat fields but for the percentile
// objects and the shares array.
#ifndef DLOCK_ADAPTERS_TESTS_BENCH_JSON_H_
#define DLOCK_ADAPTERS_TESTS_BENCH_JSON_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace dlock::test {

// The records (each `{"backend":...}`) in output order.
inline std::vector<std::string> BenchRecords(const std::string& json) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(json, '\n')) {
    const size_t at = line.find("{\"backend\"");
    if (at != absl::string_view::npos) out.emplace_back(line.substr(at));
  }
  return out;
}

// The records of `scenario`.
inline std::vector<std::string> BenchRecordsOf(const std::string& json,
                                               const std::string& scenario) {
  std::vector<std::string> out;
  for (const std::string& r : BenchRecords(json)) {
    if (absl::StrContains(r, absl::StrCat("\"scenario\":\"", scenario, "\""))) {
      out.push_back(r);
    }
  }
  return out;
}

// The raw text of `"key":value` up to the next ',' or '}' (nested objects
// are reached with a dotted key: "acquire_us.p50").
inline std::optional<std::string> BenchRaw(absl::string_view record,
                                           absl::string_view key) {
  std::vector<absl::string_view> path = absl::StrSplit(key, '.');
  for (size_t i = 0; i < path.size(); ++i) {
    const std::string quoted = absl::StrCat("\"", path[i], "\":");
    const size_t at = record.find(quoted);
    if (at == absl::string_view::npos) return std::nullopt;
    record.remove_prefix(at + quoted.size());
  }
  const size_t end = record.find_first_of(",}");
  return std::string(record.substr(0, end));
}

inline double BenchNumber(absl::string_view record, absl::string_view key) {
  std::optional<std::string> raw = BenchRaw(record, key);
  double value = -1;
  if (!raw.has_value() || !absl::SimpleAtod(*raw, &value)) return -1;
  return value;
}

// The shares array of a contention record.
inline std::vector<double> BenchShares(absl::string_view record) {
  std::vector<double> out;
  const size_t at = record.find("\"shares\":[");
  if (at == absl::string_view::npos) return out;
  record.remove_prefix(at + 10);
  record = record.substr(0, record.find(']'));
  for (absl::string_view part : absl::StrSplit(record, ',')) {
    double v = 0;
    if (absl::SimpleAtod(part, &v)) out.push_back(v);
  }
  return out;
}

}  // namespace dlock::test

#endif  // DLOCK_ADAPTERS_TESTS_BENCH_JSON_H_
