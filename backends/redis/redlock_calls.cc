// The Redlock calls on a hold after its grant (release, renewal, the
// liveness heartbeat, the hold's local bound) and the admin calls, each
// asked of every master at once and added up against the quorum.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "redis_holder_ops.h"
#include "redlock_backend.h"

namespace dlock::redis {

absl::StatusOr<int64_t> RedlockBackend::Release(const ReleaseCall& call) {
  Replies replies = OnEach([&](const Master& m, size_t) {
    if (!call.shape.IsLockWriter()) {
      return HolderReleaseScript(m, keys_, call.shape, call.name, call.owner,
                                 call.CountToSubtract());
    }
    return WriterReleaseScript(m, call.name, call.owner, call.CountToSubtract(),
                               call.keep_for);
  });
  size_t answered = 0;
  size_t held_here = 0;
  int64_t left = 0;
  absl::Status error;
  for (size_t i = 0; i < replies.size(); ++i) {
    absl::StatusOr<int64_t> r = Parse(replies[i], [&](const redisReply* reply) {
      return ParseRelease(reply, call.name, masters_[i]->endpoint());
    });
    if (r.ok()) {
      ++answered;
      ++held_here;
      left = std::max(left, *r);
    } else if (IsGone(r.status())) {
      ++answered;
    } else if (error.ok()) {
      error = r.status();
    }
  }
  // Held on fewer than a quorum even counting the masters that did not
  // answer: the hold was already gone as a lock.
  const size_t unanswered = masters_.size() - answered;
  if (held_here + unanswered < quorum_) return NotOwnerError(call.name);
  if (answered < quorum_) return NoQuorum("release", answered, error);
  if (held_here < quorum_) {
    return NoQuorum("release (the hold was confirmed by too few)", held_here,
                    error);
  }
  return left;
}

// Every due renewal in one pipeline per master, all masters at once.
std::vector<absl::Status> RedlockBackend::RenewMany(
    absl::Span<const RenewCall> calls) {
  const MonoTime sent = clock_.Now();
  std::vector<Master::Pending> pending;
  for (const std::unique_ptr<Master>& m : masters_) {
    std::vector<ScriptCall> scripts;
    for (const RenewCall& call : calls) {
      scripts.push_back(call.shape.IsLockWriter()
                            ? RenewScript(*m, keys_, liveness_, call.name,
                                          call.owner, call.lease)
                            : HolderRenewScript(*m, keys_, liveness_,
                                                call.shape, call.name,
                                                call.owner, call.lease));
    }
    pending.push_back(m->Submit(std::move(scripts)));
  }
  std::vector<std::vector<absl::StatusOr<Reply>>> replies;
  for (Master::Pending& p : pending) replies.push_back(p.Await());
  std::vector<absl::Status> results;
  for (size_t j = 0; j < calls.size(); ++j) {
    const RenewCall& call = calls[j];
    Tally tally;
    auto* hold = static_cast<RedlockHold*>(call.record);
    const MonoTime valid_until = sent + call.lease - drift_.Of(call.lease);
    for (size_t i = 0; i < masters_.size(); ++i) {
      absl::Status s = replies[i][j].ok()
                           ? ParseRenew(replies[i][j]->get(), call.name,
                                        masters_[i]->endpoint())
                           : replies[i][j].status();
      tally.Add(s);
      if (hold == nullptr) continue;
      if (s.ok()) hold->Renewed(i, valid_until);
      if (IsGone(s)) hold->GoneFrom(i);
    }
    if (tally.done >= quorum_ && clock_.Now() < valid_until) {
      if (hold != nullptr) hold->Extend(valid_until);
      results.push_back(absl::OkStatus());
    } else if (tally.gone > masters_.size() - quorum_) {
      // No quorum can hold it for this owner any more.
      results.push_back(NotOwnerError(call.name));
    } else if (tally.done >= quorum_) {
      results.push_back(absl::UnavailableError(absl::StrCat(
          "renewing ", call.name, " on a quorum of redlock masters took ",
          "longer than the lease left after drift")));
    } else {
      results.push_back(NoQuorum("renew", tally.done, tally.error));
    }
  }
  return results;
}

// The lease a quorum vouches for and, with liveness, the time until which
// the hold lives on enough masters that no quorum can grant it to another
// (docs/redis.md, "Redlock and holder liveness").
MonoTime RedlockBackend::HeldUntil(absl::string_view, absl::string_view,
                                   const HoldRecord* record) {
  if (record == nullptr) return MonoTime::InfiniteFuture();
  const auto* hold = static_cast<const RedlockLockHold*>(record);
  if (!KeepsLiveness()) return hold->valid_until();
  return std::min(hold->valid_until(),
                  hold->BlockingUntil(hold->chains(), blocking_));
}

// The key is written on every master at once. OK when enough masters
// confirmed that holds can live on (`blocking_`); which holds do is
// HeldUntil's answer, since a hold counts only the masters that granted
// it and have kept its holder's key without a gap since.
absl::Status RedlockBackend::RenewLiveness(absl::Duration) {
  if (!KeepsLiveness()) return Backend::RenewLiveness(absl::ZeroDuration());
  const std::vector<std::shared_ptr<RedlockLockHold>> holds = held_.Current();
  if (holds.empty()) return absl::OkStatus();
  const MonoTime sent = clock_.Now();
  std::vector<Master::Pending> pending;
  for (const std::unique_ptr<Master>& m : masters_) {
    std::vector<ScriptCall> scripts;
    for (const std::shared_ptr<RedlockLockHold>& hold : holds) {
      scripts.push_back(
          hold->shape().IsLockWriter()
              ? RefreshLivenessScript(*m, keys_, liveness_, hold->name(),
                                      hold->owner(), hold->token())
              : HolderRefreshLivenessScript(*m, keys_, liveness_, hold->shape(),
                                            hold->name(), hold->owner(),
                                            hold->token()));
    }
    pending.push_back(m->Submit(std::move(scripts)));
  }
  size_t answered = 0;
  absl::Status error;
  for (size_t i = 0; i < masters_.size(); ++i) {
    std::vector<absl::StatusOr<Reply>> replies = pending[i].Await();
    const KeyWrite write{.sent = sent, .replied = clock_.Now()};
    bool all = true;
    for (size_t j = 0; j < holds.size(); ++j) {
      absl::StatusOr<bool> held = Parse(
          std::optional(std::move(replies[j])), [&](const redisReply* reply) {
            return ParseRefreshLiveness(reply, masters_[i]->endpoint());
          });
      if (!held.ok()) {
        if (error.ok()) error = held.status();
        all = false;
      } else if (*held) {
        holds[j]->chains().Confirm(i, write);
      }
    }
    if (all) ++answered;
  }
  if (answered >= blocking_) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("the liveness refresh reached ", answered, " of ",
                   masters_.size(), " redlock masters, holds need ", blocking_,
                   error.ok() ? "" : absl::StrCat(": ", error.message())));
}

absl::StatusOr<LockInfo> RedlockBackend::Inspect(absl::string_view name) {
  Replies replies = OnEach(
      [&](const Master& m, size_t) { return InspectScript(m, keys_, name); });
  absl::StatusOr<std::vector<LockInfo>> copies = QuorumAnswers<LockInfo>(
      replies, "inspect", [&](const redisReply* r, absl::string_view endpoint) {
        return ParseInspect(r, name, endpoint);
      });
  if (!copies.ok()) return copies.status();
  return AgreedLock(name, *std::move(copies));
}

LockInfo RedlockBackend::AgreedLock(absl::string_view name,
                                    std::vector<LockInfo> copies) const {
  absl::flat_hash_map<std::string, std::vector<LockInfo>> by_owner;
  for (LockInfo& info : copies) {
    if (info.locked) by_owner[info.owner].push_back(std::move(info));
  }
  LockInfo out;
  out.name = std::string(name);
  for (auto& [owner, infos] : by_owner) {
    if (std::optional<LockInfo> agreed = QuorumHolder(std::move(infos))) {
      out = *std::move(agreed);
    }
  }
  return out;
}

absl::StatusOr<std::vector<LockInfo>> RedlockBackend::List(
    absl::string_view prefix) {
  return InspectHeld(ScanEveryMaster(
      [&](Master& m) { return ScanLockNames(m, keys_, prefix); }));
}

// Each name once, from a quorum of masters at least: a name on fewer than a
// quorum is held by nobody, and Inspect says so.
absl::StatusOr<std::vector<std::string>> RedlockBackend::ScanEveryMaster(
    absl::FunctionRef<absl::StatusOr<std::vector<std::string>>(Master&)> scan) {
  std::vector<std::string> names;
  size_t answered = 0;
  absl::Status error;
  for (const std::unique_ptr<Master>& m : masters_) {
    absl::StatusOr<std::vector<std::string>> some = scan(*m);
    if (!some.ok()) {
      if (error.ok()) error = some.status();
      continue;
    }
    ++answered;
    names.insert(names.end(), some->begin(), some->end());
  }
  if (answered < quorum_) return NoQuorum("list", answered, error);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

// The lock's readers go with it.
absl::Status RedlockBackend::ForceUnlock(absl::string_view name) {
  Replies replies = OnEach([&](const Master& m, size_t) {
    ScriptCall force = ForceUnlockScript(m, keys_, name);
    AddReadersKey(keys_, name, force);
    return force;
  });
  size_t answered = 0;
  absl::Status error;
  for (const auto& r : replies) {
    if (r->ok()) {
      ++answered;
    } else if (error.ok()) {
      error = r->status();
    }
  }
  // Removed from a quorum: no owner holds it as a lock any more.
  if (answered < quorum_) return NoQuorum("force unlock", answered, error);
  return absl::OkStatus();
}

// Each master removes its key only while it carries the token. Removed from
// a quorum, the hold is left on fewer than a quorum, whatever token the
// other copies carry.
absl::Status RedlockBackend::ForceUnlockIfToken(absl::string_view name,
                                                uint64_t fencing_token) {
  Replies replies = OnEach([&](const Master& m, size_t) {
    ScriptCall force = ForceUnlockIfTokenScript(m, keys_, name, fencing_token);
    AddReadersKey(keys_, name, force);
    return force;
  });
  return ForceUnlockVerdict(replies, name, fencing_token);
}

absl::Status RedlockBackend::ForceUnlockVerdict(
    const Replies& replies, absl::string_view name,
    std::optional<uint64_t> fencing_token) const {
  absl::StatusOr<std::vector<bool>> removals = QuorumAnswers<bool>(
      replies,
      fencing_token.has_value() ? "force unlock on a token" : "force unlock",
      [](const redisReply* r, absl::string_view endpoint) {
        return ParseForceUnlockIfToken(r, endpoint);
      });
  if (!removals.ok()) return removals.status();
  const size_t removed = std::count(removals->begin(), removals->end(), true);
  if (!fencing_token.has_value()) return absl::OkStatus();
  if (removed == 0) return TokenMismatchError(name, *fencing_token);
  // A master that kept its copy may hold it for the same owner under
  // another token (counters that disagreed at the grant): only removal from
  // a quorum leaves the owner short of one.
  if (removed < quorum_) {
    return absl::UnavailableError(absl::StrCat(
        "force unlock of '", name, "' on token ", *fencing_token,
        " removed it from ", removed, " of ", masters_.size(),
        " redlock masters, fewer than a quorum (", quorum_,
        "): its holder may still hold it; inspect it and try again"));
  }
  return absl::OkStatus();
}

// Every master's, summed: each keeps its own copy of the locks.
absl::StatusOr<ServerMemory> RedlockBackend::ServerMemoryUse() {
  int64_t total = 0;
  for (const std::unique_ptr<Master>& m : masters_) {
    absl::StatusOr<int64_t> bytes = UsedMemory(*m);
    if (!bytes.ok()) return bytes.status();
    total += *bytes;
  }
  return ServerMemory{total,
                      absl::StrCat("INFO memory used_memory, summed over ",
                                   masters_.size(), " masters")};
}

}  // namespace dlock::redis
