// The client core's part of the primitives of issue 24 beyond holds, which
// go through the same acquisition, release and renewal as a lock's (keyed
// by qualified names, qualified_name.h): whether the backend offers them,
// the object-level admin calls, an election's proclaim, and the wait for an
// object's change.
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client_core.h"
#include "dlock/ride_out.h"
#include "qualified_name.h"

namespace dlock::internal {
namespace {

absl::string_view PrimitiveName(ObjectKind kind, bool shared) {
  switch (kind) {
    case ObjectKind::kSemaphore:
      return "semaphores";
    case ObjectKind::kElection:
      return "elections";
    case ObjectKind::kLock:
      break;
  }
  return shared ? "read-write locks" : "locks";
}

}  // namespace

void ClientCore::FillPrimitivesNote(BackendTraits& traits,
                                    absl::string_view endpoint) {
  if (!traits.primitives_note.empty()) return;
  std::vector<absl::string_view> missing;
  if (!traits.semaphores) missing.push_back("semaphores");
  if (!traits.read_write_locks) missing.push_back("read-write locks");
  if (!traits.elections) missing.push_back("elections");
  if (missing.empty()) return;
  traits.primitives_note =
      absl::StrCat("the backend at ", endpoint, " does not implement ",
                   absl::StrJoin(missing, ", "),
                   " (yet); docs/backends.md says which backends offer them");
}

absl::Status ClientCore::CheckOffered(ObjectKind kind, bool shared) const {
  const bool offered = kind == ObjectKind::kSemaphore ? traits_.semaphores
                       : kind == ObjectKind::kElection
                           ? traits_.elections
                           : !shared || traits_.read_write_locks;
  if (offered) return absl::OkStatus();
  return absl::UnimplementedError(
      absl::StrCat(PrimitiveName(kind, shared),
                   " are not offered here: ", traits_.primitives_note));
}

absl::StatusOr<std::string> ClientCore::OwnerOf(
    absl::string_view owner_token) const {
  return ResolveOwner(owner_token);
}

bool ClientCore::Believes(absl::string_view key, absl::string_view owner) {
  absl::MutexLock lock(&state_.mu);
  return !state_.closed &&
         state_.holds.BelievedEntry(HoldKeyView(key, owner)) != nullptr;
}

absl::StatusOr<ObjectInfo> ClientCore::InspectObject(ObjectKind kind,
                                                     absl::string_view name) {
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  return state_.backend->InspectObject(kind, name);
}

absl::StatusOr<std::vector<ObjectInfo>> ClientCore::ListObjects(
    ObjectKind kind, absl::string_view prefix) {
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  return state_.backend->ListObjects(kind, prefix);
}

absl::Status ClientCore::ForceUnlockObject(
    ObjectKind kind, absl::string_view name,
    std::optional<uint64_t> fencing_token) {
  if (fencing_token == 0u) {
    return absl::InvalidArgumentError(absl::StrCat(
        "force unlock of ", ObjectKindName(kind), " '", name,
        "' on fencing token 0: no hold has token 0; pass the token that "
        "Inspect() or ListObjects() reported"));
  }
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  absl::Status forced =
      state_.backend->ForceUnlockObject(kind, name, fencing_token);
  if (IsTokenMismatch(forced) && kind != ObjectKind::kLock) {
    // Worded for the object, not a lock.
    return TokenMismatchError(QualifiedName(name, HoldShape{.kind = kind}),
                              *fencing_token);
  }
  return forced;
}

absl::Status ClientCore::Proclaim(const ::dlock::Hold& hold,
                                  absl::string_view value) {
  const std::string key =
      QualifiedName(hold.lock_name(), HoldShape{.kind = ObjectKind::kElection});
  const HoldKeyView at(key, hold.owner());
  std::vector<LossNotice> notices;
  absl::Status proclaimed;
  {
    absl::ReaderMutexLock in_flight(&ops_mu_);
    std::shared_ptr<HoldRecord> record;
    {
      absl::MutexLock lock(&state_.mu);
      if (state_.closed) return state_.ClosedError();
      const HoldEntry* entry = state_.holds.BelievedEntry(at);
      if (entry == nullptr || entry->fencing_token != hold.fencing_token()) {
        return LostError(key, "the leadership ended before this proclaim");
      }
      record = entry->record;
    }
    proclaimed = state_.backend->Proclaim(ProclaimCall{
        .name = hold.lock_name(),
        .owner = hold.owner(),
        .record = record.get(),
        .term = hold.fencing_token(),
        .value = value,
    });
    if (IsGone(proclaimed)) {
      // As a renewal that finds the hold gone: lost, told once (C20).
      absl::MutexLock lock(&state_.mu);
      state_.holds.FoundGone(at, hold.fencing_token(), proclaimed, notices);
      proclaimed = LostError(key, proclaimed.message());
    }
  }
  // Without ops_mu_: a callback may call the client, even Close().
  notifier_.Deliver(notices);
  return proclaimed;
}

absl::StatusOr<ObjectInfo> ClientCore::WaitForObject(
    ObjectKind kind, absl::string_view name, MonoTime until,
    const CancelToken& cancel,
    absl::FunctionRef<bool(const ObjectInfo&)> changed) {
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  CancelToken either;
  ScopedCancelCallback by_caller(cancel, [either] { either.Cancel(); });
  ScopedCancelCallback by_close(closing_, [either] { either.Cancel(); });
  // Registered before the first reading, so that a change in between
  // wakes the wait below (C9).
  std::unique_ptr<ObjectWatch> watch = state_.backend->WatchObject(kind, name);
  const std::string phrase =
      absl::StrCat(ObjectKindName(kind), " '", name, "'");
  const MonoTime started = state_.clock.Now();
  while (true) {
    absl::StatusOr<ObjectInfo> now_seen =
        state_.backend->InspectObject(kind, name);
    if (!now_seen.ok() || changed(*now_seen)) return now_seen;
    if (closing_.IsCancelled()) return state_.ClosedError();
    if (cancel.IsCancelled()) {
      return absl::CancelledError(
          absl::StrCat("wait for a change of ", phrase, " was cancelled"));
    }
    const MonoTime now = state_.clock.Now();
    if (now >= until) {
      return WithKind(absl::DeadlineExceededError(
                          absl::StrCat(phrase, " did not change within ",
                                       absl::FormatDuration(now - started))),
                      ErrorKind::kWaitExpired);
    }
    // The fallback poll, in case an announcement is lost (C9).
    const MonoTime wake = std::min(until, now + state_.options.fallback_poll);
    if (watch != nullptr) {
      watch->Wait(wake, either);
    } else {
      PauseUnlessCancelled(state_.clock, wake, either);
    }
  }
}

}  // namespace dlock::internal
