#include "etcd_layout.h"

#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dlock::etcd {
namespace {

constexpr absl::string_view kMagic = "dlock-etcd1";
// The liveness field of a hold that its lease alone ends.
constexpr absl::string_view kNoLiveness = "-";

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

std::string LivenessKey(absl::string_view liveness_id) {
  return absl::StrCat(kLivenessPrefix, liveness_id);
}

void AddLiveness(HoldValue& value, const std::optional<std::string>& id,
                 bool fresh) {
  if (!id.has_value()) {
    value.live.clear();
  } else if (fresh) {
    value.live = {*id};
  } else if (!value.live.empty() && !absl::c_linear_search(value.live, *id)) {
    value.live.push_back(*id);
  }
}

std::string Encode(const HoldValue& value) {
  return absl::StrCat(
      kMagic, " ", value.holds, " ", value.lease_ms, " ", value.since_ms, " ",
      value.write_id, " ",
      value.live.empty() ? kNoLiveness : absl::StrJoin(value.live, ","), "\n",
      value.owner);
}

std::optional<HoldValue> Decode(absl::string_view text) {
  const size_t newline = text.find('\n');
  if (newline == absl::string_view::npos) return std::nullopt;
  const std::vector<absl::string_view> fields =
      absl::StrSplit(text.substr(0, newline), ' ');
  HoldValue value;
  if (fields.size() != 6 || fields[0] != kMagic ||
      !absl::SimpleAtoi(fields[1], &value.holds) ||
      !absl::SimpleAtoi(fields[2], &value.lease_ms) ||
      !absl::SimpleAtoi(fields[3], &value.since_ms) || value.holds < 0) {
    return std::nullopt;
  }
  value.write_id = std::string(fields[4]);
  if (fields[5] != kNoLiveness) {
    value.live = absl::StrSplit(fields[5], ',', absl::SkipEmpty());
  }
  value.owner = std::string(text.substr(newline + 1));
  return value;
}

}  // namespace dlock::etcd
