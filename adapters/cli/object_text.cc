#include "object_text.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "lock_table.h"
#include "nlohmann/json.hpp"

namespace dlock::cli {
namespace {

using Json = nlohmann::ordered_json;

int64_t PermitsHeld(const ObjectInfo& info) {
  int64_t used = 0;
  for (const HolderInfo& h : info.holders) {
    used += static_cast<int64_t>(h.slots.size());
  }
  return used;
}

bool HasReaders(const ObjectInfo& info) {
  return !info.holders.empty() && info.holders.front().shared;
}

std::string SinceText(absl::Time t) {
  if (t == absl::InfinitePast()) return "";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

std::string LiveText(const std::optional<bool>& live) {
  if (!live.has_value()) return "";
  return *live ? ", live" : ", NOT live";
}

}  // namespace

std::string KindColumn(const ObjectInfo& info) {
  switch (info.kind) {
    case ObjectKind::kLock:
      return HasReaders(info) ? "read" : "lock";
    case ObjectKind::kSemaphore:
      return "sem";
    case ObjectKind::kElection:
      return "elect";
  }
  return "?";
}

absl::StatusOr<ObjectKind> ParseKind(absl::string_view text) {
  const std::string kind = absl::AsciiStrToLower(text);
  if (kind == "lock" || kind == "read" || kind == "rw")
    return ObjectKind::kLock;
  if (kind == "semaphore" || kind == "sem") return ObjectKind::kSemaphore;
  if (kind == "election" || kind == "elect") return ObjectKind::kElection;
  return absl::InvalidArgumentError(absl::StrCat(
      "--kind: '", text, "' is not a kind; use lock, semaphore or election"));
}

std::string HoldersSummary(const ObjectInfo& info) {
  std::string out;
  switch (info.kind) {
    case ObjectKind::kLock:
      if (info.holders.empty()) {
        out = info.kept_after_release ? "kept after release" : "free";
      } else if (HasReaders(info)) {
        out = absl::StrCat(info.holders.size(),
                           info.holders.size() == 1 ? " reader" : " readers");
      } else {
        out = "writer";
      }
      if (info.waiter.has_value()) absl::StrAppend(&out, ", writer waiting");
      return out;
    case ObjectKind::kSemaphore:
      out = absl::StrCat(PermitsHeld(info), "/", info.limit, " permits");
      if (info.waiter.has_value()) {
        absl::StrAppend(&out, ", ", info.waiter->permits, " waiting");
      }
      return out;
    case ObjectKind::kElection:
      if (info.holders.empty()) return "no leader";
      return absl::StrCat("term ", info.holders.front().fencing_token);
  }
  return out;
}

std::string HolderLine(const HolderInfo& holder) {
  return absl::StrCat(holder.owner, " (fencing token ", holder.fencing_token,
                      ")");
}

std::string ObjectStatusText(const ObjectInfo& info) {
  const char* kind = info.kind == ObjectKind::kSemaphore  ? "semaphore"
                     : info.kind == ObjectKind::kElection ? "election"
                                                          : "lock";
  std::string out =
      absl::StrCat(info.name, " (", kind, "): ", HoldersSummary(info), "\n");
  for (const HolderInfo& h : info.holders) {
    const char* role = info.kind == ObjectKind::kElection ? "leader"
                       : info.kind == ObjectKind::kSemaphore
                           ? "holder"
                           : (h.shared ? "reader" : "writer");
    absl::StrAppend(&out, "  ", role, ": ", HolderLine(h));
    if (!h.slots.empty()) {
      absl::StrAppend(&out, " slots ", absl::StrJoin(h.slots, ","));
    }
    absl::StrAppend(&out, ", lease left ", ShortDuration(h.remaining_lease),
                    LiveText(h.holder_live), "\n");
  }
  if (info.kind == ObjectKind::kElection && !info.holders.empty()) {
    absl::StrAppend(&out, "  value: ", info.value, "\n");
  }
  if (info.waiter.has_value()) {
    absl::StrAppend(
        &out, "  waiting: ", info.waiter->owner,
        info.kind == ObjectKind::kSemaphore
            ? absl::StrCat(" for ", info.waiter->permits, " permits")
            : std::string(" (writer)"),
        "\n");
  }
  return out;
}

absl::StatusOr<std::vector<ObjectInfo>> ListObjectsBeyondWriters(
    LockClient& client, absl::string_view prefix,
    std::optional<ObjectKind> kind) {
  std::vector<ObjectInfo> out;
  for (ObjectKind k :
       {ObjectKind::kLock, ObjectKind::kSemaphore, ObjectKind::kElection}) {
    if (kind.has_value() && k != *kind) continue;
    absl::StatusOr<std::vector<ObjectInfo>> listed =
        client.Admin().ListObjects(k, prefix);
    if (!listed.ok()) {
      if (!kind.has_value() && absl::IsUnimplemented(listed.status())) continue;
      return listed.status();
    }
    for (ObjectInfo& info : *listed) {
      const bool writer = k == ObjectKind::kLock && !info.holders.empty() &&
                          !info.holders[0].shared;
      if (!kind.has_value() && (writer || info.kept_after_release)) continue;
      out.push_back(std::move(info));
    }
  }
  return out;
}

LockInfo ObjectAsLockRow(const ObjectInfo& info) {
  LockInfo row;
  row.name = absl::StrCat(info.name, " (", KindColumn(info), ")");
  row.locked = true;
  std::vector<std::string> owners;
  row.remaining_lease = absl::InfiniteDuration();
  row.since = absl::InfiniteFuture();
  // Not live as soon as one holder is not; unknown if any is unknown.
  bool unknown = false, all_live = true;
  for (const HolderInfo& h : info.holders) {
    owners.push_back(h.owner);
    row.fencing_token = std::max(row.fencing_token, h.fencing_token);
    row.remaining_lease = std::min(row.remaining_lease, h.remaining_lease);
    row.since = std::min(row.since, h.since);
    unknown = unknown || !h.holder_live.has_value();
    all_live = all_live && h.holder_live.value_or(true);
  }
  if (!unknown) row.holder_live = all_live;
  if (info.holders.empty()) {
    row.remaining_lease = absl::ZeroDuration();
    row.since = absl::InfinitePast();
  }
  row.owner = absl::StrCat(HoldersSummary(info), owners.empty() ? "" : ": ",
                           absl::StrJoin(owners, ", "));
  return row;
}

std::vector<DeadObjectHolder> DeadObjectHolders(
    const std::vector<ObjectInfo>& objects) {
  std::vector<DeadObjectHolder> dead;
  for (const ObjectInfo& info : objects) {
    for (const HolderInfo& h : info.holders) {
      if (h.holder_live == std::optional<bool>(false)) {
        dead.push_back({info.kind, info.name, h.owner, h.fencing_token});
      }
    }
  }
  return dead;
}

Json ObjectJson(const ObjectInfo& info) {
  Json out = {{"kind", std::string(ObjectKindName(info.kind))},
              {"name", info.name},
              {"limit", info.limit}};
  Json& holders = out["holders"] = Json::array();
  for (const HolderInfo& h : info.holders) {
    holders.push_back(
        {{"owner", h.owner},
         {"shared", h.shared},
         {"hold_count", h.hold_count},
         {"fencing_token", h.fencing_token},
         {"slots", h.slots},
         {"lease_left_ms", absl::ToInt64Milliseconds(h.remaining_lease)},
         {"since", SinceText(h.since)},
         {"holder_live",
          h.holder_live.has_value() ? Json(*h.holder_live) : Json(nullptr)}});
  }
  out["waiter"] = info.waiter.has_value()
                      ? Json{{"owner", info.waiter->owner},
                             {"permits", info.waiter->permits},
                             {"handed_over", info.waiter->handed_over}}
                      : Json(nullptr);
  if (info.kind == ObjectKind::kElection) out["value"] = info.value;
  out["kept_after_release"] = info.kept_after_release;
  return out;
}

}  // namespace dlock::cli
