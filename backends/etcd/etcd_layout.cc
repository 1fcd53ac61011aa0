#include "etcd_layout.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dlock::etcd {
namespace {

constexpr absl::string_view kMagic = "dlock-etcd1";

std::string EscapeNamespace(absl::string_view ns) {
  std::string out;
  for (char c : ns) {
    if (c == '%') {
      out += "%25";
    } else if (c == '/') {
      out += "%2F";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Layout::Layout(absl::string_view lock_namespace)
    : prefix_(absl::StrCat("/dlock/", EscapeNamespace(lock_namespace), "/")) {}

std::string Layout::Key(absl::string_view name) const {
  return absl::StrCat(prefix_, name);
}

std::optional<absl::string_view> Layout::NameOf(absl::string_view key) const {
  if (!absl::ConsumePrefix(&key, prefix_)) return std::nullopt;
  return key;
}

std::string Encode(const HoldValue& value) {
  return absl::StrCat(kMagic, " ", value.holds, " ", value.lease_ms, " ",
                      value.since_ms, " ", value.write_id, "\n", value.owner);
}

std::optional<HoldValue> Decode(absl::string_view text) {
  const size_t newline = text.find('\n');
  if (newline == absl::string_view::npos) return std::nullopt;
  const std::vector<absl::string_view> fields =
      absl::StrSplit(text.substr(0, newline), ' ');
  HoldValue value;
  if (fields.size() != 5 || fields[0] != kMagic ||
      !absl::SimpleAtoi(fields[1], &value.holds) ||
      !absl::SimpleAtoi(fields[2], &value.lease_ms) ||
      !absl::SimpleAtoi(fields[3], &value.since_ms) || value.holds < 0) {
    return std::nullopt;
  }
  value.write_id = std::string(fields[4]);
  value.owner = std::string(text.substr(newline + 1));
  return value;
}

}  // namespace dlock::etcd
