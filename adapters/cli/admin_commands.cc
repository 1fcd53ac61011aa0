#include "admin_commands.h"

#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "lock_table.h"

namespace dlock::cli {
namespace {

std::string FormatSince(absl::Time since) {
  if (since == absl::InfinitePast()) return "";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", since, absl::UTCTimeZone());
}

std::string InfoJson(const LockInfo& info) {
  std::vector<std::string> fields = {
      absl::StrCat("\"name\":", JsonString(info.name)),
      absl::StrCat("\"locked\":", info.locked ? "true" : "false")};
  if (info.locked) {
    fields.push_back(absl::StrCat("\"owner\":", JsonString(info.owner)));
    fields.push_back(absl::StrCat("\"kept_after_release\":",
                                  info.kept_after_release ? "true" : "false"));
    fields.push_back(absl::StrCat("\"hold_count\":", info.hold_count));
    fields.push_back(absl::StrCat("\"fencing_token\":", info.fencing_token));
    fields.push_back(absl::StrCat(
        "\"lease_left_ms\":", absl::ToInt64Milliseconds(info.remaining_lease)));
    if (info.since != absl::InfinitePast()) {
      fields.push_back(
          absl::StrCat("\"since\":", JsonString(FormatSince(info.since))));
    }
  }
  return absl::StrCat("{", absl::StrJoin(fields, ","), "}");
}

void Print(const std::string& text) { std::fputs(text.c_str(), stdout); }

absl::StatusOr<LockInfo> InspectNamed(LockClient& client,
                                      const std::string& name) {
  absl::StatusOr<LockInfo> info = client.Admin().Inspect(name);
  if (info.ok() && info->name.empty()) info->name = name;
  return info;
}

}  // namespace

int StatusCommand(const BackendFlags& flags, const std::string& name) {
  int code = kOk;
  std::unique_ptr<LockClient> client = ConnectOrFail(flags, code);
  if (client == nullptr) return code;
  absl::StatusOr<LockInfo> info = InspectNamed(*client, name);
  if (!info.ok()) return Fail(info.status());
  if (flags.json) {
    Print(InfoJson(*info) + "\n");
  } else if (!info->locked) {
    Print(absl::StrCat(name, ": free\n"));
  } else {
    Print(absl::StrFormat(
        "%s: locked\n  holder:        %s\n  hold count:    %d\n"
        "  fencing token: %d\n  lease left:    %s\n  since:         %s\n",
        name, HolderText(*info), info->hold_count, info->fencing_token,
        absl::FormatDuration(info->remaining_lease), FormatSince(info->since)));
  }
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
    std::vector<std::string> items;
    for (const LockInfo& info : *locks) items.push_back(InfoJson(info));
    Print(absl::StrCat("[", absl::StrJoin(items, ","), "]\n"));
    return kOk;
  }
  if (locks->empty()) {
    Print(prefix.empty()
              ? "no locks held\n"
              : absl::StrCat("no locks held starting with '", prefix, "'\n"));
    return kOk;
  }
  Print(absl::StrFormat("%-32s %-14s %-12s %s\n", "NAME", "FENCING-TOKEN",
                        "LEASE-LEFT", "HOLDER"));
  for (const LockInfo& info : *locks) {
    Print(absl::StrFormat("%-32s %-14d %-12s %s\n", info.name,
                          info.fencing_token,
                          absl::FormatDuration(absl::Trunc(
                              info.remaining_lease, absl::Milliseconds(1))),
                          HolderText(info)));
  }
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
    std::string out = absl::StrCat("{\"name\":", JsonString(name),
                                   ",\"unlocked\":true,\"was_locked\":",
                                   before->locked ? "true" : "false");
    if (before->locked) {
      absl::StrAppend(&out, ",\"previous_owner\":", JsonString(before->owner),
                      ",\"previous_fencing_token\":", before->fencing_token);
    }
    Print(out + "}\n");
  } else if (before->locked) {
    Print(absl::StrCat(name, ": unlocked (was held by ", HolderText(*before),
                       ", fencing token ", before->fencing_token, ")\n"));
  } else {
    Print(absl::StrCat(name, ": was not locked\n"));
  }
  return kOk;
}

}  // namespace dlock::cli
