#include "run_modes.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dlock/election.h"
#include "dlock/multi_lock.h"
#include "dlock/rw_lock.h"
#include "dlock/semaphore.h"
#include "lock_table.h"
#include "object_text.h"

namespace dlock::cli {
namespace {

// A Hold (a lock's, a reader's) as a grant; `env` what the command sees.
Held HeldOf(Hold hold, std::vector<EnvVar> env) {
  auto shared = std::make_shared<Hold>(std::move(hold));
  return Held{.lost = [shared] { return shared->lost(); },
              .release = [shared] { return shared->Release(); },
              .env = std::move(env)};
}

std::vector<EnvVar> LockEnv(const std::string& name, uint64_t token) {
  return {{"DLOCK_FENCING_TOKEN", absl::StrCat(token)},
          {"DLOCK_LOCK_NAME", name}};
}

// "held by X (fencing token 7)", "another owner" when it cannot be read.
std::string LockBusy(LockClient& client, const std::string& name) {
  absl::StatusOr<LockInfo> info = client.Admin().Inspect(name);
  if (!info.ok() || !info->locked) return "held by another owner";
  return absl::StrCat("held by ", HolderText(*info), " (fencing token ",
                      info->fencing_token, ")");
}

// "held by a writer, X (fencing token 7)", "wanted by a waiting writer".
std::string ObjectBusy(const absl::StatusOr<ObjectInfo>& info) {
  if (!info.ok()) return "held by another owner";
  if (info->kind == ObjectKind::kLock && info->holders.empty() &&
      info->waiter.has_value()) {
    return absl::StrCat("wanted by a waiting writer, ", info->waiter->owner,
                        " (new readers wait behind it)");
  }
  if (info->kind == ObjectKind::kLock && !info->holders.empty() &&
      !info->holders.front().shared) {
    return absl::StrCat("held by a writer, ",
                        HolderLine(info->holders.front()));
  }
  if (info->kind == ObjectKind::kElection && !info->holders.empty()) {
    return absl::StrCat("led by ", HolderLine(info->holders.front()));
  }
  return absl::StrCat("busy (", HoldersSummary(*info), " held)");
}

// A target whose grant is one Hold: a writer's or a reader's.
RunTarget HoldTarget(
    const std::string& name,
    std::function<absl::StatusOr<Hold>(const AcquireOptions&)> take,
    std::function<std::string()> busy) {
  return RunTarget{
      .acquire = [name, take = std::move(take)](
                     const AcquireOptions& options) -> absl::StatusOr<Held> {
        absl::StatusOr<Hold> hold = take(options);
        if (!hold.ok()) return hold.status();
        const uint64_t token = hold->fencing_token();
        return HeldOf(*std::move(hold), LockEnv(name, token));
      },
      .busy = std::move(busy)};
}

absl::StatusOr<RunTarget> LockTarget(LockClient& client,
                                     const std::string& name) {
  absl::StatusOr<std::unique_ptr<DistributedLock>> got = client.GetLock(name);
  if (!got.ok()) return got.status();
  std::shared_ptr<DistributedLock> lock = *std::move(got);
  return HoldTarget(
      name,
      [lock](const AcquireOptions& options) { return lock->Acquire(options); },
      [&client, name] { return LockBusy(client, name); });
}

absl::StatusOr<RunTarget> ReadTarget(LockClient& client,
                                     const std::string& name) {
  absl::StatusOr<std::unique_ptr<ReadWriteLock>> got =
      client.GetReadWriteLock(name);
  if (!got.ok()) return got.status();
  std::shared_ptr<ReadWriteLock> rw = *std::move(got);
  return HoldTarget(
      name,
      [rw](const AcquireOptions& options) { return rw->AcquireRead(options); },
      [rw] { return ObjectBusy(rw->Inspect()); });
}

absl::StatusOr<RunTarget> PermitTarget(LockClient& client,
                                       const std::string& name, int64_t permits,
                                       int64_t take) {
  absl::StatusOr<std::unique_ptr<Semaphore>> got =
      client.GetSemaphore(name, permits);
  if (!got.ok()) return got.status();
  std::shared_ptr<Semaphore> semaphore = *std::move(got);
  return RunTarget{
      .acquire = [semaphore, name,
                  take](const AcquireOptions& options) -> absl::StatusOr<Held> {
        absl::StatusOr<Permit> got = semaphore->Acquire(take, options);
        if (!got.ok()) return got.status();
        auto permit = std::make_shared<Permit>(*std::move(got));
        std::vector<EnvVar> env = LockEnv(name, permit->fencing_token());
        env.push_back(
            {"DLOCK_PERMIT_SLOTS", absl::StrJoin(permit->slots(), ",")});
        return Held{.lost = [permit] { return permit->lost(); },
                    .release = [permit] { return permit->Release(); },
                    .env = std::move(env)};
      },
      .busy = [semaphore] { return ObjectBusy(semaphore->Inspect()); }};
}

absl::StatusOr<RunTarget> AllTarget(LockClient& client,
                                    const std::vector<std::string>& names) {
  return RunTarget{
      .acquire = [&client, names](
                     const AcquireOptions& options) -> absl::StatusOr<Held> {
        absl::StatusOr<MultiHold> got = client.AcquireAll(names, options);
        if (!got.ok()) return got.status();
        auto all = std::make_shared<MultiHold>(*std::move(got));
        std::vector<uint64_t> tokens;
        for (const Hold& hold : all->holds()) {
          tokens.push_back(hold.fencing_token());
        }
        return Held{
            .lost = [all] { return all->lost(); },
            .release = [all] { return all->Release(); },
            // Names may hold commas and spaces, never newlines (C15).
            .env = {{"DLOCK_LOCK_NAMES", absl::StrJoin(names, "\n")},
                    {"DLOCK_FENCING_TOKENS", absl::StrJoin(tokens, "\n")}}};
      },
      .busy =
          [&client, names] {
            std::vector<std::string> held;
            for (const std::string& name : names) {
              absl::StatusOr<LockInfo> info = client.Admin().Inspect(name);
              if (info.ok() && info->locked) {
                held.push_back(
                    absl::StrCat("'", name, "' by ", HolderText(*info)));
              }
            }
            if (held.empty()) return std::string("held by another owner");
            return absl::StrCat("held: ", absl::StrJoin(held, ", "));
          }};
}

absl::StatusOr<RunTarget> LeaderTarget(LockClient& client,
                                       const std::string& name,
                                       const std::string& value) {
  absl::StatusOr<std::unique_ptr<Election>> got = client.GetElection(name);
  if (!got.ok()) return got.status();
  std::shared_ptr<Election> election = *std::move(got);
  return RunTarget{
      .acquire = [election, name, value](
                     const AcquireOptions& options) -> absl::StatusOr<Held> {
        absl::StatusOr<Leadership> got = election->Campaign(value, options);
        if (!got.ok()) return got.status();
        auto leadership = std::make_shared<Leadership>(*std::move(got));
        return Held{
            .lost = [leadership] { return leadership->lost(); },
            .release = [leadership] { return leadership->Resign(); },
            .env = {{"DLOCK_ELECTION", name},
                    {"DLOCK_LEADER_TERM", absl::StrCat(leadership->term())},
                    {"DLOCK_LEADER_VALUE", leadership->value()}}};
      },
      .busy =
          [election] {
            absl::StatusOr<LeaderInfo> leader = election->Leader();
            if (!leader.ok() || !leader->has_leader) {
              return std::string("led by another campaigner");
            }
            return absl::StrCat("led by ", leader->owner, " (term ",
                                leader->term, ", value ", leader->value, ")");
          }};
}

}  // namespace

RunMode LockMode(const std::string& name) {
  return {absl::StrCat("lock '", name, "'"),
          [name](LockClient& client) { return LockTarget(client, name); }};
}

RunMode ReadMode(const std::string& name) {
  return {absl::StrCat("read lock '", name, "'"),
          [name](LockClient& client) { return ReadTarget(client, name); }};
}

RunMode PermitMode(const std::string& name, int64_t permits, int64_t take) {
  return {absl::StrCat("semaphore '", name, "'"), [=](LockClient& client) {
            return PermitTarget(client, name, permits, take);
          }};
}

RunMode AllMode(const std::vector<std::string>& names) {
  return {absl::StrCat("locks '", absl::StrJoin(names, "', '"), "'"),
          [names](LockClient& client) { return AllTarget(client, names); }};
}

RunMode LeaderMode(const std::string& name, const std::string& value) {
  return {
      absl::StrCat("leadership of election '", name, "'"),
      [=](LockClient& client) { return LeaderTarget(client, name, value); }};
}

}  // namespace dlock::cli
