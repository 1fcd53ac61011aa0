#include "zk_layout.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dlock/backend/rules.h"

namespace dlock::zk {
namespace {

constexpr char kHex[] = "0123456789ABCDEF";
constexpr absl::string_view kDataVersion = "dlock1";
constexpr absl::string_view kKeptPrefix = "kept-";
constexpr absl::string_view kKeptVersion = "dlockkept1";
// What marks the parents of the kinds beyond the lock: the control byte
// no lock name holds, escaped (C15).
constexpr absl::string_view kControlByte = "%1F";

bool Kept(char c) {
  return absl::ascii_isalnum(c) || c == '_' || c == '-' || c == '.';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string EncodeName(absl::string_view name) {
  const bool all_escaped = name == "." || name == "..";
  std::string out;
  out.reserve(name.size() * 3);
  for (char c : name) {
    if (Kept(c) && !all_escaped) {
      out.push_back(c);
    } else {
      const auto byte = static_cast<unsigned char>(c);
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xF]);
    }
  }
  return out;
}

std::optional<std::string> DecodeName(absl::string_view component) {
  std::string out;
  for (size_t i = 0; i < component.size(); ++i) {
    if (component[i] != '%') {
      out.push_back(component[i]);
      continue;
    }
    if (i + 2 >= component.size()) return std::nullopt;
    const int hi = HexValue(component[i + 1]);
    const int lo = HexValue(component[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  if (EncodeName(out) != component) return std::nullopt;
  return out;
}

std::string ObjectComponent(ObjectKind kind, absl::string_view name) {
  if (kind == ObjectKind::kLock) return EncodeName(name);
  const char letter = KindLetter(kind);
  return absl::StrCat(kControlByte, absl::string_view(&letter, 1),
                      EncodeName(name));
}

std::optional<std::string> ObjectNameOf(ObjectKind kind,
                                        absl::string_view component) {
  if (kind != ObjectKind::kLock) {
    const char letter = KindLetter(kind);
    if (!absl::ConsumePrefix(&component, kControlByte) ||
        !absl::ConsumePrefix(&component, absl::string_view(&letter, 1))) {
      return std::nullopt;
    }
  } else if (absl::StartsWith(component, kControlByte)) {
    return std::nullopt;
  }
  return DecodeName(component);
}

std::optional<int64_t> SequenceOf(absl::string_view node_name) {
  constexpr size_t kDigits = 10;  // ZooKeeper appends %010d
  constexpr absl::string_view kMarker = "-lock-";
  if (node_name.size() < kMarker.size() + kDigits) return std::nullopt;
  absl::string_view tail = node_name.substr(node_name.size() - kDigits);
  if (node_name.substr(node_name.size() - kDigits - kMarker.size(),
                       kMarker.size()) != kMarker) {
    return std::nullopt;
  }
  int64_t seq = 0;
  if (!absl::SimpleAtoi(tail, &seq)) return std::nullopt;
  return seq;
}

std::vector<std::string> SortedQueue(std::vector<std::string> children) {
  std::vector<std::pair<int64_t, std::string>> keyed;
  keyed.reserve(children.size());
  for (std::string& child : children) {
    if (std::optional<int64_t> seq = SequenceOf(child)) {
      keyed.emplace_back(*seq, std::move(child));
    }
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<std::string> queue;
  queue.reserve(keyed.size());
  for (auto& [seq, name] : keyed) queue.push_back(std::move(name));
  return queue;
}

bool IsReadNode(absl::string_view node_name) {
  constexpr size_t kTail = sizeof("lock-0000000000") - 1;
  return SequenceOf(node_name).has_value() &&
         node_name.size() > kTail + kReadTag.size() &&
         node_name.substr(node_name.size() - kTail - kReadTag.size(),
                          kReadTag.size()) == kReadTag;
}

std::string ReaderOwner(absl::string_view owner) {
  return absl::StrCat("r:", owner);
}

absl::string_view OwnerOfReader(absl::string_view stored) {
  return absl::ConsumePrefix(&stored, "r:") ? stored : absl::string_view();
}

uint64_t TokenOf(const NodeData& data, uint64_t czxid) {
  uint64_t token = 0;
  if (!OwnerOfReader(data.owner).empty() && data.value.has_value() &&
      absl::SimpleAtoi(*data.value, &token)) {
    return token;
  }
  return czxid;
}

std::string PermitsTag(const PermitsAsked& asked) {
  return absl::StrCat("s", asked.permits, "of", asked.limit, "-");
}

std::optional<PermitsAsked> PermitsOf(absl::string_view node_name) {
  constexpr size_t kTail = sizeof("-lock-0000000000") - 1;
  if (!SequenceOf(node_name).has_value()) return std::nullopt;
  absl::string_view head = node_name.substr(0, node_name.size() - kTail);
  const size_t dash = head.rfind('-');
  if (dash == absl::string_view::npos) return std::nullopt;
  absl::string_view tag = head.substr(dash + 1);
  if (!absl::ConsumePrefix(&tag, "s")) return std::nullopt;
  std::vector<absl::string_view> parts =
      absl::StrSplit(tag, absl::MaxSplits("of", 1));
  PermitsAsked asked;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &asked.permits) ||
      !absl::SimpleAtoi(parts[1], &asked.limit) || asked.permits < 1 ||
      asked.limit < asked.permits) {
    return std::nullopt;
  }
  return asked;
}

std::string WaitingValue() { return "w"; }

std::string AdmittedValue(const std::vector<int64_t>& slots) {
  return absl::StrCat("h ", FormatSlots(slots));
}

std::optional<std::vector<int64_t>> AdmittedSlots(
    const std::optional<std::string>& value) {
  if (!value.has_value()) return std::nullopt;
  absl::string_view rest = *value;
  if (!absl::ConsumePrefix(&rest, "h ")) return std::nullopt;
  return ParseSlots(rest);
}

std::string Serialize(const NodeData& data) {
  std::string line =
      absl::StrCat(kDataVersion, " ", data.holds, " ", data.lease_ms, " ",
                   data.kept_ms, " ", data.since_ms, " ", data.owner);
  if (data.value.has_value()) absl::StrAppend(&line, "\n", *data.value);
  return line;
}

std::optional<NodeData> Parse(absl::string_view text) {
  std::optional<std::string> value;
  if (const size_t newline = text.find('\n');
      newline != absl::string_view::npos) {
    value = std::string(text.substr(newline + 1));
    text = text.substr(0, newline);
  }
  std::vector<absl::string_view> parts =
      absl::StrSplit(text, absl::MaxSplits(' ', 5));
  if (parts.size() != 6 || parts[0] != kDataVersion) return std::nullopt;
  NodeData data;
  if (!absl::SimpleAtoi(parts[1], &data.holds) ||
      !absl::SimpleAtoi(parts[2], &data.lease_ms) ||
      !absl::SimpleAtoi(parts[3], &data.kept_ms) ||
      !absl::SimpleAtoi(parts[4], &data.since_ms) || data.holds < 1 ||
      parts[5].empty()) {
    return std::nullopt;
  }
  data.owner = std::string(parts[5]);
  data.value = std::move(value);
  return data;
}

std::string KeptNodeName(uint64_t token) {
  return absl::StrCat(kKeptPrefix, token);
}

bool IsKeptNode(absl::string_view node_name) {
  return absl::StartsWith(node_name, kKeptPrefix);
}

std::string SerializeKept(const KeptData& data) {
  return absl::StrCat(kKeptVersion, " ", data.keep_ms, " ", data.token);
}

std::optional<KeptData> ParseKept(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ' ');
  KeptData data;
  if (parts.size() != 3 || parts[0] != kKeptVersion ||
      !absl::SimpleAtoi(parts[1], &data.keep_ms) ||
      !absl::SimpleAtoi(parts[2], &data.token)) {
    return std::nullopt;
  }
  return data;
}

}  // namespace dlock::zk
