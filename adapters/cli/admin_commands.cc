#include "admin_commands.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "dlock/adapters/job_guard.h"
#include "lock_table.h"
#include "nlohmann/json.hpp"

namespace dlock::cli {
namespace {

using Json = nlohmann::ordered_json;

std::string FormatSince(absl::Time since) {
  if (since == absl::InfinitePast()) return "";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", since, absl::UTCTimeZone());
}

// The fields a script reads, in a fixed order: those of before liveness
// first, so that the output only grew.
Json InfoJson(const LockInfo& info) {
  Json out = {{"name", info.name}, {"locked", info.locked}};
  if (!info.locked) return out;
  out["owner"] = info.owner;
  out["kept_after_release"] = info.kept_after_release;
  out["hold_count"] = info.hold_count;
  out["fencing_token"] = info.fencing_token;
  out["lease_left_ms"] = absl::ToInt64Milliseconds(info.remaining_lease);
  if (info.since != absl::InfinitePast())
    out["since"] = FormatSince(info.since);
  out["holder_live"] =
      info.holder_live.has_value() ? Json(*info.holder_live) : Json(nullptr);
  out["takeable"] = Takeable(info);
  return out;
}

void Print(const std::string& text) { std::fputs(text.c_str(), stdout); }

absl::StatusOr<LockInfo> InspectNamed(LockClient& client,
                                      const std::string& name) {
  absl::StatusOr<LockInfo> info = client.Admin().Inspect(name);
  if (info.ok() && info->name.empty()) info->name = name;
  return info;
}

std::string StatusText(const LockInfo& info) {
  if (!info.locked) return absl::StrCat(info.name, ": free\n");
  std::string out = absl::StrCat(info.name, ": locked");
  if (Takeable(info)) absl::StrAppend(&out, ", ", TakeableWhy(info));
  absl::StrAppend(&out, "\n  holder:        ", HolderText(info), "\n");
  if (!info.kept_after_release) {
    absl::StrAppend(
        &out, "  holder live:   ",
        !info.holder_live.has_value() ? "unknown (the backend cannot tell)"
        : *info.holder_live
            ? "yes"
            : "no (the next acquire takes the lock over; no need for "
              "unlock --force)",
        "\n");
  }
  absl::StrAppend(&out,
                  absl::StrFormat("  hold count:    %d\n  fencing token: %d\n"
                                  "  lease left:    %s\n  since:         %s\n",
                                  info.hold_count, info.fencing_token,
                                  ShortDuration(info.remaining_lease),
                                  FormatSince(info.since)));
  return out;
}

// A scheduled job's slot, in words: what `dlock run --once-per` will do.
std::string SlotState(const LockInfo& slot) {
  if (slot.kept_after_release) {
    return absl::StrCat("ran (closed for ", ShortDuration(slot.remaining_lease),
                        " more)");
  }
  if (Takeable(slot)) return absl::StrCat("free to run: ", TakeableWhy(slot));
  return absl::StrCat("running (held by ", HolderText(slot), ")");
}

// A free `name` may be a scheduled job, whose runs lock name@slot: those
// held or kept now, where the backend can list.
absl::StatusOr<std::vector<LockInfo>> JobSlots(LockClient& client,
                                               const std::string& name) {
  if (!client.traits().can_list) return std::vector<LockInfo>();
  return client.Admin().List(absl::StrCat(JobRunLockName(name, ""), "@"));
}

}  // namespace

int StatusCommand(const BackendFlags& flags, const std::string& name) {
  int code = kOk;
  std::unique_ptr<LockClient> client = ConnectOrFail(flags, code);
  if (client == nullptr) return code;
  absl::StatusOr<LockInfo> info = InspectNamed(*client, name);
  if (!info.ok()) return Fail(info.status());
  std::vector<LockInfo> slots;
  if (!info->locked) {
    absl::StatusOr<std::vector<LockInfo>> found = JobSlots(*client, name);
    if (!found.ok()) return Fail(found.status());
    slots = *std::move(found);
  }
  if (flags.json) {
    Json out = InfoJson(*info);
    if (!slots.empty()) {
      Json& jobs = out["job_slots"] = Json::array();
      for (const LockInfo& slot : slots) {
        Json one = InfoJson(slot);
        one["slot_state"] = slot.kept_after_release ? "ran"
                            : Takeable(slot)        ? "free"
                                                    : "running";
        jobs.push_back(std::move(one));
      }
    }
    Print(DumpJson(out) + "\n");
    return kOk;
  }
  if (slots.empty()) {
    Print(StatusText(*info));
    return kOk;
  }
  std::string out =
      absl::StrCat(name, ": free as a lock; as a scheduled job:\n");
  for (const LockInfo& slot : slots) {
    absl::StrAppend(&out, "  slot ", slot.name.substr(slot.name.find('@') + 1),
                    ": ", SlotState(slot), "\n");
  }
  Print(out);
  return kOk;
}

int ListCommand(const BackendFlags& flags, const std::string& prefix) {
  int code = kOk;
  std::unique_ptr<LockClient> client = ConnectOrFail(flags, code);
  if (client == nullptr) return code;
  absl::StatusOr<std::vector<LockInfo>> locks = client->Admin().List(prefix);
  if (!locks.ok()) {
    if (locks.status().code() == absl::StatusCode::kUnimplemented) {
      return Fail(kFailed, absl::StrCat("this backend cannot list locks (",
                                        locks.status().message(), ")"));
    }
    return Fail(locks.status());
  }
  if (flags.json) {
    Json out = Json::array();
    for (const LockInfo& info : *locks) out.push_back(InfoJson(info));
    Print(DumpJson(out) + "\n");
    return kOk;
  }
  if (locks->empty()) {
    Print(prefix.empty()
              ? "no locks held\n"
              : absl::StrCat("no locks held starting with '", prefix, "'\n"));
    return kOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "FENCING-TOKEN", "LEASE-LEFT", "LIVE", "HOLDER"}};
  bool any_takeable = false;
  for (const LockInfo& info : *locks) {
    rows.push_back({info.name, absl::StrCat(info.fencing_token),
                    ShortDuration(info.remaining_lease), LiveText(info),
                    HolderText(info)});
    any_takeable = any_takeable || Takeable(info);
  }
  std::string out = AlignColumns(rows);
  if (any_takeable) {
    absl::StrAppend(&out,
                    "LIVE no: the holder is gone, and the next acquire takes "
                    "the lock over; no need for unlock --force\n");
  }
  Print(out);
  return kOk;
}

int UnlockCommand(const BackendFlags& flags, const std::string& name,
                  bool force, uint64_t token) {
  if (!force) {
    return Fail(kUsage,
                "unlock removes the lock whoever holds it; say so with "
                "--force (see dlock unlock --help)");
  }
  int code = kOk;
  std::unique_ptr<LockClient> client = ConnectOrFail(flags, code);
  if (client == nullptr) return code;
  LockAdmin& admin = client->Admin();
  // Only to tell the operator whom they unlocked; the removal is one atomic
  // operation either way (C12).
  absl::StatusOr<LockInfo> before = admin.Inspect(name);
  if (!before.ok()) return Fail(before.status());
  if (absl::Status s =
          token != 0 ? admin.ForceUnlock(name, token) : admin.ForceUnlock(name);
      !s.ok()) {
    return Fail(s);
  }
  if (flags.json) {
    Json out = {
        {"name", name}, {"unlocked", true}, {"was_locked", before->locked}};
    if (before->locked) {
      out["previous_owner"] = before->owner;
      out["previous_fencing_token"] = before->fencing_token;
    }
    Print(DumpJson(out) + "\n");
  } else if (before->locked) {
    Print(absl::StrCat(name, ": unlocked (was held by ", HolderText(*before),
                       ", fencing token ", before->fencing_token, ")\n"));
  } else {
    Print(absl::StrCat(name, ": was not locked\n"));
  }
  return kOk;
}

}  // namespace dlock::cli
