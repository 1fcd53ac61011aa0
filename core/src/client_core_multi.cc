// A multi-lock's names taken in one atomic step by a backend that can
// (Backend::AcquireAll, MultiLockMode::kAtomic; C25): each name is an
// acquisition of its own in the tables (a release still pending for it is
// settled first, C21), sent together, and recorded together; what cannot
// be believed is given back with the rest.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client_core.h"
#include "dlock/ride_out.h"

namespace dlock::internal {

absl::Status ClientCore::MultiAcquireError(const absl::Status& error,
                                           absl::Span<const std::string> names,
                                           const AcquireOptions& options,
                                           MonoTime start) const {
  if (closing_.IsCancelled() && !options.cancel.IsCancelled()) {
    return state_.ClosedError();
  }
  if (!absl::IsDeadlineExceeded(error)) return error;
  // The backend's message names the lock that stayed held.
  const bool waited = options.wait > absl::ZeroDuration();
  return WithKind(
      absl::DeadlineExceededError(absl::StrCat(
          "locks '", absl::StrJoin(names, "', '"), "' not all acquired",
          waited ? absl::StrCat(" within ", absl::FormatDuration(
                                                state_.clock.Now() - start))
                 : "",
          ": ", error.message())),
      waited ? ErrorKind::kWaitExpired : ErrorKind::kHeldByAnother);
}

absl::StatusOr<std::vector<::dlock::Hold>> ClientCore::AcquireTogether(
    absl::Span<const std::string> names, const AcquireOptions& options) {
  absl::StatusOr<std::string> owner = ResolveOwner(options.owner_token);
  if (!owner.ok()) return owner.status();
  absl::StatusOr<absl::Duration> lease = LeaseOf(options);
  if (!lease.ok()) return lease.status();
  absl::ReaderMutexLock in_flight(&ops_mu_);
  const MonoTime start = state_.clock.Now();
  const bool waits = options.wait > absl::ZeroDuration();
  const MonoTime deadline = options.wait == absl::InfiniteDuration()
                                ? MonoTime::InfiniteFuture()
                                : start + options.wait;
  // A blocking wait ends on the caller's cancel or on Close().
  CancelToken either;
  ScopedCancelCallback by_caller(options.cancel, [either] { either.Cancel(); });
  ScopedCancelCallback by_close(closing_, [either] { either.Cancel(); });
  std::vector<MultiPart> parts(
      names.size());  // sized once: calls view the keys
  for (size_t i = 0; i < names.size(); ++i) {
    parts[i].key = HoldKey(names[i], *owner);
    parts[i].call = AcquireCall{.name = parts[i].key.first,
                                .owner = parts[i].key.second,
                                .owner_kind = options.owner_token.empty()
                                                  ? OwnerKind::kThread
                                                  : OwnerKind::kToken,
                                .lease = *lease,
                                .deadline = deadline,
                                .cancel = either};
  }
  // Registered one by one; a part that cannot be ends the call.
  size_t registered = 0;
  absl::Status settled;
  for (MultiPart& p : parts) {
    settled = SettleAndRegister(p.key, p.call, waits, p.releases_sent, p.held);
    if (!settled.ok()) break;
    p.call.held = p.held.get();
    ++registered;
  }
  absl::StatusOr<std::vector<Grant>> grants = absl::InternalError("not sent");
  if (!settled.ok()) {
    grants = settled;
  } else {
    std::vector<AcquireCall> calls;
    for (const MultiPart& p : parts) calls.push_back(p.call);
    RideOut ride(state_.clock, names.front(),
                 waits ? deadline : MonoTime::InfinitePast(), either);
    do {
      grants = state_.backend->AcquireAll(calls, deadline, either);
    } while (!grants.ok() && ride.Again(grants.status()));
    if (!grants.ok()) grants = ride.Final(grants.status());
  }
  return RecordTogether(parts, registered, std::move(grants), names, options,
                        start);
}

absl::StatusOr<std::vector<::dlock::Hold>> ClientCore::RecordTogether(
    std::vector<MultiPart>& parts, size_t registered,
    absl::StatusOr<std::vector<Grant>> grants,
    absl::Span<const std::string> names, const AcquireOptions& options,
    MonoTime start) {
  if (grants.ok() && grants->size() != parts.size()) {
    grants = absl::InternalError("the backend's AcquireAll lost a grant");
  }
  absl::Status failed = grants.status();
  std::vector<::dlock::Hold> holds;
  std::vector<bool> fresh(registered, false);
  {
    absl::MutexLock lock(&state_.mu);
    // Every registered part is recorded, or its registration ended, in
    // FinishAcquire; a grant not to be believed is let go there.
    for (size_t i = 0; i < registered; ++i) {
      absl::StatusOr<Grant> grant =
          grants.ok() ? absl::StatusOr<Grant>((*grants)[i])
                      : absl::StatusOr<Grant>(grants.status());
      bool is_fresh = false;
      absl::StatusOr<::dlock::Hold> hold = FinishAcquire(
          parts[i].key, parts[i].call, options, start, parts[i].releases_sent,
          std::move(parts[i].held), std::move(grant), nullptr, is_fresh);
      fresh[i] = is_fresh;
      if (hold.ok()) {
        holds.push_back(*std::move(hold));
      } else if (failed.ok()) {
        failed = hold.status();
      }
    }
  }
  TellTogether(holds, fresh, names, failed, start);
  if (failed.ok()) return holds;
  // Nothing is left held by this call (C25); an unconfirmed release is
  // retried in the background (C21).
  for (::dlock::Hold& hold : holds) hold.Release().IgnoreError();
  return MultiAcquireError(failed, names, options, start);
}

void ClientCore::TellTogether(const std::vector<::dlock::Hold>& holds,
                              const std::vector<bool>& fresh,
                              absl::Span<const std::string> names,
                              const absl::Status& failed,
                              MonoTime start) const {
  if (!state_.observer) return;
  const absl::Duration waited = state_.clock.Now() - start;
  if (!failed.ok()) {
    for (const std::string& name : names) {
      state_.observer.Tell(&LockObserver::OnAcquireFailed,
                           AcquireFailedEvent{
                               .lock_namespace = state_.lock_namespace,
                               .name = name,
                               .waited = waited,
                               .error = failed,
                           });
    }
  }
  // Granted holds are told, so that their releases (below, on failure)
  // end what was told.
  for (size_t i = 0; i < holds.size(); ++i) {
    state_.observer.Tell(&LockObserver::OnGrant,
                         GrantEvent{.lock_namespace = state_.lock_namespace,
                                    .name = holds[i].lock_name(),
                                    .owner = holds[i].owner(),
                                    .fencing_token = holds[i].fencing_token(),
                                    .hold_count = holds[i].hold_count(),
                                    .fresh = i < fresh.size() && fresh[i],
                                    .waited = waited});
  }
}

}  // namespace dlock::internal
