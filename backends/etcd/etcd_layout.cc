#include "etcd_layout.h"

#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "dlock/backend/rules.h"

namespace dlock::etcd {
namespace {

constexpr absl::string_view kMagic = "dlock-etcd1";
// Marks a lock's readers' keys (KindLetter has none for a lock).
constexpr absl::string_view kReaderLetter = "r";
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

std::string ObjectName(ObjectKind kind, absl::string_view name) {
  if (kind == ObjectKind::kLock) return std::string(name);
  return absl::StrCat("\x1f", std::string(1, KindLetter(kind)), name);
}

std::optional<NamedObject> ParseObjectName(absl::string_view object_name) {
  if (!absl::ConsumePrefix(&object_name, "\x1f")) {
    return NamedObject{ObjectKind::kLock, object_name};
  }
  if (absl::ConsumePrefix(&object_name, kReaderLetter)) {
    return NamedObject{ObjectKind::kLock,
                       object_name.substr(0, object_name.find('\x1f')),
                       /*readers=*/true};
  }
  for (ObjectKind kind : {ObjectKind::kElection, ObjectKind::kSemaphore}) {
    const char letter[] = {KindLetter(kind), '\0'};
    if (absl::ConsumePrefix(&object_name, letter)) {
      // A semaphore's keys go on after its name (HoldObjectName).
      return NamedObject{kind, object_name.substr(0, object_name.find('\x1f'))};
    }
  }
  return std::nullopt;
}

std::string HoldObjectName(const HoldShape& shape, absl::string_view name,
                           absl::string_view owner) {
  if (shape.kind == ObjectKind::kLock && shape.mode == HoldMode::kShared) {
    return absl::StrCat(ReadersPrefix(name), owner);
  }
  if (shape.kind != ObjectKind::kSemaphore) return ObjectName(shape.kind, name);
  return absl::StrCat(SemaphorePrefix(name), "h", owner);
}

std::string ReadersPrefix(absl::string_view lock) {
  return absl::StrCat(ReadersAndIntentPrefix(lock), "h");
}

std::string ReadersAndIntentPrefix(absl::string_view lock) {
  // No valid name holds a control byte: "\x1f" ends the lock's name.
  return absl::StrCat(ReadLocksPrefix(lock), "\x1f");
}

std::string ReadLocksPrefix(absl::string_view name_prefix) {
  return absl::StrCat("\x1f", kReaderLetter, name_prefix);
}

std::string IntentName(absl::string_view lock) {
  return absl::StrCat(ReadersAndIntentPrefix(lock), "p");
}

std::string PlaceName(absl::string_view semaphore) {
  return absl::StrCat(SemaphorePrefix(semaphore), "p");
}

std::string SemaphorePrefix(absl::string_view semaphore) {
  return absl::StrCat(ObjectName(ObjectKind::kSemaphore, semaphore), "\x1f");
}

std::string EncodePermits(const PermitsValue& permits) {
  return absl::StrCat(permits.limit, " ", permits.permits, " ",
                      permits.slots.empty() ? "-" : FormatSlots(permits.slots));
}

std::optional<PermitsValue> DecodePermits(absl::string_view text) {
  const std::vector<absl::string_view> fields = absl::StrSplit(text, ' ');
  PermitsValue out;
  if (fields.size() != 3 || !absl::SimpleAtoi(fields[0], &out.limit) ||
      !absl::SimpleAtoi(fields[1], &out.permits) || out.limit < 1 ||
      out.permits < 1) {
    return std::nullopt;
  }
  if (fields[2] != "-") {
    std::optional<std::vector<int64_t>> slots = ParseSlots(fields[2]);
    if (!slots.has_value()) return std::nullopt;
    out.slots = *std::move(slots);
  }
  return out;
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
      value.live.empty() ? kNoLiveness : absl::StrJoin(value.live, ","),
      // A lock's value has no value field: as written before elections.
      value.value.empty() ? "" : absl::StrCat(" ", value.value.size()), "\n",
      value.value, value.owner);
}

std::optional<HoldValue> Decode(absl::string_view text) {
  const size_t newline = text.find('\n');
  if (newline == absl::string_view::npos) return std::nullopt;
  const std::vector<absl::string_view> fields =
      absl::StrSplit(text.substr(0, newline), ' ');
  HoldValue value;
  size_t value_size = 0;
  if ((fields.size() != 6 && fields.size() != 7) || fields[0] != kMagic ||
      !absl::SimpleAtoi(fields[1], &value.holds) ||
      !absl::SimpleAtoi(fields[2], &value.lease_ms) ||
      !absl::SimpleAtoi(fields[3], &value.since_ms) ||
      (fields.size() == 7 && !absl::SimpleAtoi(fields[6], &value_size)) ||
      value.holds < 0 || value_size > text.size() - newline - 1) {
    return std::nullopt;
  }
  value.write_id = std::string(fields[4]);
  if (fields[5] != kNoLiveness) {
    value.live = absl::StrSplit(fields[5], ',', absl::SkipEmpty());
  }
  value.value = std::string(text.substr(newline + 1, value_size));
  value.owner = std::string(text.substr(newline + 1 + value_size));
  return value;
}

}  // namespace dlock::etcd
