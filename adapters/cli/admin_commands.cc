#include "admin_commands.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "dlock/adapters/job_guard.h"
#include "dlock/election.h"
#include "dlock/rw_lock.h"
#include "dlock/semaphore.h"
#include "lock_table.h"
#include "nlohmann/json.hpp"
#include "object_text.h"

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

// The object of `kind` under `name` as the backend sees it now; an
// election as its leader.
absl::StatusOr<ObjectInfo> InspectKind(LockClient& client, ObjectKind kind,
                                       const std::string& name) {
  switch (kind) {
    case ObjectKind::kLock: {
      auto rw = client.GetReadWriteLock(name);
      if (!rw.ok()) return rw.status();
      return (*rw)->Inspect();
    }
    case ObjectKind::kSemaphore: {
      // Inspect reads the N in force, whatever N the handle was made with.
      auto semaphore = client.GetSemaphore(name, 1);
      if (!semaphore.ok()) return semaphore.status();
      return (*semaphore)->Inspect();
    }
    case ObjectKind::kElection:
      break;
  }
  auto election = client.GetElection(name);
  if (!election.ok()) return election.status();
  absl::StatusOr<LeaderInfo> leader = (*election)->Leader();
  if (!leader.ok()) return leader.status();
  ObjectInfo info{.kind = ObjectKind::kElection, .name = name, .limit = 1};
  if (leader->has_leader) {
    info.holders.push_back(
        HolderInfo{.owner = leader->owner,
                   .hold_count = 1,
                   .fencing_token = leader->term,
                   .remaining_lease = leader->remaining_lease,
                   .since = leader->since,
                   .holder_live = leader->leader_live});
    info.value = leader->value;
  }
  return info;
}

// The objects beyond a lock's writer under `name` that hold or wait now:
// its readers, a semaphore, an election. Kinds the backend does not offer
// are left out (Unimplemented), as are free objects.
std::vector<ObjectInfo> OtherObjectsNamed(LockClient& client,
                                          const std::string& name) {
  std::vector<ObjectInfo> out;
  for (ObjectKind kind :
       {ObjectKind::kLock, ObjectKind::kSemaphore, ObjectKind::kElection}) {
    absl::StatusOr<ObjectInfo> info = InspectKind(client, kind, name);
    if (!info.ok() || (info->holders.empty() && !info->waiter.has_value())) {
      continue;
    }
    // A writer is the lock's, shown as such already.
    if (kind == ObjectKind::kLock && !info->holders.empty() &&
        !info->holders[0].shared) {
      continue;
    }
    if (info->name.empty()) info->name = name;
    out.push_back(*std::move(info));
  }
  return out;
}

std::string LockRows(const std::vector<LockInfo>& locks) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "FENCING-TOKEN", "LEASE-LEFT", "LIVE", "HOLDER"}};
  bool any_takeable = false;
  for (const LockInfo& info : locks) {
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
  return out;
}

std::string ObjectRows(const std::vector<ObjectInfo>& objects) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "KIND", "HOLDERS", "FENCING-TOKEN", "LEASE-LEFT"}};
  for (const ObjectInfo& info : objects) {
    uint64_t token = 0;
    absl::Duration lease = absl::ZeroDuration();
    for (const HolderInfo& h : info.holders) {
      token = std::max(token, h.fencing_token);
      lease = std::max(lease, h.remaining_lease);
    }
    rows.push_back({info.name, KindColumn(info), HoldersSummary(info),
                    token == 0 ? "-" : absl::StrCat(token),
                    ShortDuration(lease)});
  }
  return AlignColumns(rows);
}

// `status` in words: the lock (or a scheduled job's slots), then the other
// objects under the name.
std::string StatusWords(const std::string& name, const LockInfo& info,
                        const std::vector<LockInfo>& slots,
                        const std::vector<ObjectInfo>& others) {
  std::string out;
  if (!slots.empty()) {
    out = absl::StrCat(name, ": free as a lock; as a scheduled job:\n");
    for (const LockInfo& slot : slots) {
      absl::StrAppend(&out, "  slot ",
                      slot.name.substr(slot.name.find('@') + 1), ": ",
                      SlotState(slot), "\n");
    }
  } else if (info.locked || others.empty()) {
    // "free" only when nothing else is under the name.
    out = StatusText(info);
  }
  for (const ObjectInfo& object : others) {
    absl::StrAppend(&out, ObjectStatusText(object));
  }
  return out;
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
  const std::vector<ObjectInfo> others = OtherObjectsNamed(*client, name);
  if (!flags.json) {
    Print(StatusWords(name, *info, slots, others));
    return kOk;
  }
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
  if (!others.empty()) {
    Json& objects = out["objects"] = Json::array();
    for (const ObjectInfo& object : others)
      objects.push_back(ObjectJson(object));
  }
  Print(DumpJson(out) + "\n");
  return kOk;
}

// `list --kind K`: the objects of one kind, with their HOLDERS.
int ListKind(LockClient& client, const std::string& prefix, ObjectKind kind,
             bool json) {
  absl::StatusOr<std::vector<ObjectInfo>> objects =
      ListObjectsBeyondWriters(client, prefix, kind);
  if (!objects.ok()) {
    if (absl::IsUnimplemented(objects.status())) {
      return Fail(kFailed, absl::StrCat("this backend cannot list ",
                                        ObjectKindName(kind), "s (",
                                        objects.status().message(), ")"));
    }
    return Fail(objects.status());
  }
  if (json) {
    Json out = Json::array();
    for (const ObjectInfo& info : *objects) out.push_back(ObjectJson(info));
    Print(DumpJson(out) + "\n");
  } else if (objects->empty()) {
    Print(absl::StrCat(
        "no ", ObjectKindName(kind), "s held",
        prefix.empty() ? "" : absl::StrCat(" starting with '", prefix, "'"),
        "\n"));
  } else {
    Print(ObjectRows(*objects));
  }
  return kOk;
}

int ListCommand(const BackendFlags& flags, const std::string& prefix,
                const std::string& kind) {
  std::optional<ObjectKind> only;
  if (!kind.empty()) {
    absl::StatusOr<ObjectKind> parsed = ParseKind(kind);
    if (!parsed.ok()) return Fail(parsed.status());
    only = *parsed;
  }
  int code = kOk;
  std::unique_ptr<LockClient> client = ConnectOrFail(flags, code);
  if (client == nullptr) return code;
  if (only.has_value()) return ListKind(*client, prefix, *only, flags.json);
  absl::StatusOr<std::vector<LockInfo>> locks = client->Admin().List(prefix);
  if (!locks.ok()) {
    if (locks.status().code() == absl::StatusCode::kUnimplemented) {
      return Fail(kFailed, absl::StrCat("this backend cannot list locks (",
                                        locks.status().message(), ")"));
    }
    return Fail(locks.status());
  }
  absl::StatusOr<std::vector<ObjectInfo>> others =
      ListObjectsBeyondWriters(*client, prefix, std::nullopt);
  if (!others.ok()) return Fail(others.status());
  if (flags.json) {
    Json out = Json::array();
    for (const LockInfo& info : *locks) out.push_back(InfoJson(info));
    for (const ObjectInfo& info : *others) out.push_back(ObjectJson(info));
    Print(DumpJson(out) + "\n");
    return kOk;
  }
  if (locks->empty() && others->empty()) {
    Print(prefix.empty()
              ? "no locks held\n"
              : absl::StrCat("no locks held starting with '", prefix, "'\n"));
    return kOk;
  }
  std::string out = locks->empty() ? "" : LockRows(*locks);
  // Readers, semaphores and elections: a table of their own, so that the
  // lock table stays as scripts read it.
  if (!others->empty()) {
    absl::StrAppend(&out, out.empty() ? "" : "\n", ObjectRows(*others));
  }
  Print(out);
  return kOk;
}

namespace {

// `unlock --force --kind K NAME [--token N]`: every hold of the object, or
// the one that carries token N (ForceUnlockObject).
int UnlockObject(LockClient& client, const std::string& name, uint64_t token,
                 ObjectKind kind, bool json) {
  // Only to tell the operator whom they unlocked; the removal is one atomic
  // operation either way (C12).
  absl::StatusOr<ObjectInfo> before = InspectKind(client, kind, name);
  if (!before.ok()) return Fail(before.status());
  std::optional<uint64_t> only;
  if (token != 0) only = token;
  if (absl::Status s = client.Admin().ForceUnlockObject(kind, name, only);
      !s.ok()) {
    return Fail(s);
  }
  if (json) {
    Print(DumpJson({{"name", name},
                    {"kind", std::string(ObjectKindName(kind))},
                    {"unlocked", true},
                    {"before", ObjectJson(*before)}}) +
          "\n");
  } else {
    Print(absl::StrCat(name, ": unlocked ", ObjectKindName(kind),
                       token != 0
                           ? absl::StrCat(" hold with fencing token ", token)
                           : std::string(),
                       " (was ", HoldersSummary(*before), ")\n"));
  }
  return kOk;
}

}  // namespace

int UnlockCommand(const BackendFlags& flags, const std::string& name,
                  bool force, uint64_t token, const std::string& kind) {
  if (!force) {
    return Fail(kUsage,
                "unlock removes the lock whoever holds it; say so with "
                "--force (see dlock unlock --help)");
  }
  std::optional<ObjectKind> object_kind;
  if (!kind.empty()) {
    absl::StatusOr<ObjectKind> parsed = ParseKind(kind);
    if (!parsed.ok()) return Fail(parsed.status());
    object_kind = *parsed;
  }
  int code = kOk;
  std::unique_ptr<LockClient> client = ConnectOrFail(flags, code);
  if (client == nullptr) return code;
  if (object_kind.has_value()) {
    return UnlockObject(*client, name, token, *object_kind, flags.json);
  }
  LockAdmin& admin = client->Admin();
  // Only to tell the operator whom they unlocked; the removal is one atomic
  // operation either way (C12).
  absl::StatusOr<LockInfo> before = admin.Inspect(name);
  if (!before.ok()) return Fail(before.status());
  // The lock view shows a writer only: readers alone (whom a force unlock by
  // name ends too, C23) are in the object view.
  std::optional<ObjectInfo> readers;
  if (!before->locked && token == 0) {
    absl::StatusOr<ObjectInfo> held =
        InspectKind(*client, ObjectKind::kLock, name);
    if (held.ok() && !held->holders.empty()) readers = *std::move(held);
  }
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
    if (readers.has_value()) out["previous_readers"] = readers->holders.size();
    Print(DumpJson(out) + "\n");
  } else if (before->locked) {
    Print(absl::StrCat(name, ": unlocked (was held by ", HolderText(*before),
                       ", fencing token ", before->fencing_token, ")\n"));
  } else if (readers.has_value()) {
    Print(absl::StrCat(name, ": unlocked (was ", HoldersSummary(*readers),
                       ")\n"));
  } else {
    Print(absl::StrCat(name, ": was not locked\n"));
  }
  return kOk;
}

}  // namespace dlock::cli
