// redlock[s]://[user[:password]@]host1:port1,host2:port2,...[/db][?options]:
// one lock over N independent Redis masters, held while a majority of them
// holds it (the Redlock algorithm; docs/redis.md says what it promises).
//
// Every operation goes to all masters at once (Master::Submit, then Await)
// and counts the answers against the quorum N/2+1. A grant is good for the
// lease minus the time the attempt took minus the clock drift; the core
// counts that from the attempt's send time (Grant::sent) and this backend
// caps it with the configured drift (HeldUntil). Fencing tokens: each
// master's counter rises by one per grant there; the token is the largest
// of the quorum's, written back to a quorum before the grant returns, so
// that it exceeds every earlier token while a majority keeps its data.
// Holder liveness: this client's liveness key lives on every master, and a
// hold is believed only while it lives on enough of the masters that granted
// it, its holder's key there refreshed without a gap, that no quorum can
// grant its lock to another (redlock_hold.h; docs/redis.md).
#include "redlock_backend.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"
#include "dlock/errors.h"
#include "redis_holder_ops.h"
#include "redis_lock_ops.h"
#include "redis_master.h"
#include "redis_uri.h"

namespace dlock::redis {
namespace {

constexpr char kForm[] =
    "redlock[s]://[user[:password]@]host1:port1,host2:port2,host3:port3[/db]";
// A master must answer quickly or be counted out, so that an attempt does
// not spend its lease waiting for one that is down (the algorithm's
// per-instance timeout). operation_timeout= sets it.
constexpr absl::Duration kDefaultTimeout = absl::Milliseconds(500);

}  // namespace

RedlockBackend::RedlockBackend(const std::vector<ConnectionConfig>& hosts,
                               Keyspace keys, Liveness liveness, Drift drift,
                               absl::Duration retry_delay,
                               absl::Duration fallback_poll, const Clock& clock)
    : clock_(clock),
      keys_(std::move(keys)),
      liveness_(std::move(liveness)),
      quorum_(hosts.size() / 2 + 1),
      blocking_(hosts.size() - quorum_ + 1),
      drift_(drift),
      retry_delay_(retry_delay),
      fallback_poll_(fallback_poll),
      releases_(clock) {
  for (const ConnectionConfig& host : hosts) {
    // A master that refuses the layout (0.2 locks held there) stays out of
    // every quorum until it accepts it.
    masters_.push_back(std::make_unique<Master>(
        host, keys_.channel(), &releases_, Master::Redial::kInBackground,
        [this, endpoint = host.endpoint](Connection& conn,
                                         const Scripts& scripts) {
          return CheckLayout(conn, scripts, keys_, endpoint);
        }));
  }
}

// Starts every master at once; a client starts when a quorum answers and
// keeps trying the others in the background.
absl::Status RedlockBackend::Start() {
  std::vector<absl::Status> started(masters_.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < masters_.size(); ++i) {
    threads.emplace_back([&, i] { started[i] = masters_[i]->Start(); });
  }
  for (std::thread& t : threads) t.join();
  const size_t up = std::count_if(started.begin(), started.end(),
                                  [](const absl::Status& s) { return s.ok(); });
  if (up >= quorum_) return absl::OkStatus();
  absl::Status first =
      *std::find_if(started.begin(), started.end(),
                    [](const absl::Status& s) { return !s.ok(); });
  return absl::Status(first.code(),
                      absl::StrCat("only ", up, " of ", masters_.size(),
                                   " redlock masters answer, a quorum is ",
                                   quorum_, ": ", first.message()));
}

absl::StatusOr<Grant> RedlockBackend::Acquire(const AcquireCall& call) {
  const bool will_wait = call.deadline > clock_.Now();
  Rounds rounds;
  // An election's campaigners sleep on its message, not on the lock's name
  // (a lock's readers and writers on its name).
  const std::string message = ObjectMessage(call.shape.kind, call.name);
  absl::StatusOr<Grant> grant =
      AcquireWithWakeups(call, message, releases_, fallback_poll_,
                         [&]() { return TryRound(call, will_wait, &rounds); });
  // Readers wait behind an intent until it ends: it goes with the wait.
  if (rounds.intent_left) DropIntent(call);
  if (grant.ok()) grant->record = std::move(rounds.record);
  return grant;
}

// One attempt as the core sees it. A split vote (no owner holds a quorum,
// this one included) decides nothing: its round is given back and, for a
// single attempt (TryAcquire), run again after a random delay, a few
// times, so that callers racing for a free lock do not all come away
// empty-handed, each told that another holds it (C3). A waiting caller
// runs again through the wait loop.
absl::StatusOr<::dlock::Attempt> RedlockBackend::TryRound(
    const AcquireCall& call, bool will_wait, Rounds* rounds) {
  constexpr int kSplitRetries = 4;
  for (int splits = 0;; ++splits) {
    bool split = false;
    absl::StatusOr<::dlock::Attempt> attempt =
        OneRound(call, will_wait, rounds, &split);
    if (!split || will_wait || splits == kSplitRetries ||
        call.cancel.IsCancelled()) {
      return attempt;
    }
    absl::SleepFor(RandomDelay());
  }
}

// One round of the algorithm: the script on every master at once; on a
// quorum within the lease, the agreed token; otherwise what the round
// took is given back. `*split` says whether no owner holds a quorum.
absl::StatusOr<::dlock::Attempt> RedlockBackend::OneRound(
    const AcquireCall& call, bool will_wait, Rounds* rounds, bool* split) {
  const MonoTime sent = clock_.Now();
  // One proposal for every master: those whose floors lie below it agree.
  const uint64_t proposed = absl::ToUnixMicros(absl::Now());
  std::vector<MonoTime> replied;
  Replies replies =
      OnEach([&](const Master& m,
                 size_t) { return RoundScript(m, call, will_wait, proposed); },
             &replied);
  if (call.shape.IsLockWriter()) {
    MeetReaders(call, will_wait, proposed, replies, replied, rounds);
  }
  std::vector<std::optional<Acquired>> granted(masters_.size());
  // The holders' leases left, by holder.
  absl::flat_hash_map<std::string, std::vector<absl::Duration>> refused_by;
  size_t grants = 0;
  size_t refusals = 0;
  absl::Status error;
  absl::Status upgrade;  // the owner reads the lock there (C23)
  for (size_t i = 0; i < replies.size(); ++i) {
    absl::StatusOr<AcquireReply> a = ParseRound(replies[i], i, call);
    if (IsUpgradeRefused(a.status())) {
      upgrade = a.status();
    } else if (!a.ok()) {
      if (error.ok()) error = a.status();
    } else if (a->acquired.has_value()) {
      granted[i] = a->acquired;
      ++grants;
    } else {
      refused_by[a->holder].push_back(a->holder_lease_left);
      ++refusals;
    }
  }
  auto* held = static_cast<RedlockHold*>(call.held);
  if (!upgrade.ok()) {
    // Never a deadlock: refused at once, and nothing of the round kept.
    if (grants > 0) GiveBack(call, granted);
    return upgrade;
  }
  if (grants >= quorum_) {
    std::optional<Agreed> won = AgreeOnToken(call, held, granted);
    const MonoTime valid_until = sent + call.lease - drift_.Of(call.lease);
    if (won.has_value() && clock_.Now() < valid_until) {
      auto* hold = static_cast<RedlockLockHold*>(held);
      if (won->fresh || held == nullptr) {
        std::shared_ptr<RedlockLockHold>& record = rounds->record;
        record = std::make_shared<RedlockLockHold>(
            call.name, call.owner, call.shape, won->acquired.fencing_token,
            valid_until, masters_.size(), absl::Milliseconds(liveness_.ttl_ms),
            drift_);
        hold = record.get();
        if (KeepsLiveness()) held_.Add(record);
      } else {
        held->Extend(valid_until);
      }
      NoteGrants(*hold, sent, call.lease, granted, replied);
      return ::dlock::Attempt{.acquired = won->acquired};
    }
  }
  const absl::Duration took = clock_.Now() - sent;
  if (grants > 0) GiveBack(call, granted);
  if (grants >= quorum_) {
    // Granted by a quorum, but too late to be believed, or its token
    // could not reach a quorum: nobody else holds the lock (C19).
    return absl::UnavailableError(
        absl::StrCat("lock '", call.name, "' was granted by ", grants, " of ",
                     masters_.size(), " redlock masters, but the round took ",
                     absl::FormatDuration(took), ", past the lease of ",
                     absl::FormatDuration(call.lease),
                     " less drift, or its token reached no quorum; try again"));
  }
  if (grants + refusals < quorum_) {
    return NoQuorum("acquire", grants + refusals, error);
  }
  return Refused(refused_by, error, split);
}

::dlock::Attempt RedlockBackend::Refused(
    const absl::flat_hash_map<std::string, std::vector<absl::Duration>>&
        refused_by,
    const absl::Status& error, bool* split) const {
  for (const auto& [holder, held_for] : refused_by) {
    if (held_for.size() < quorum_) continue;
    // Held by a quorum: free once enough of its keys expire that fewer
    // than a quorum remain (a release wakes us sooner).
    std::vector<absl::Duration> leases = held_for;
    std::sort(leases.begin(), leases.end());
    return ::dlock::Attempt{
        .acquired = std::nullopt,
        .holder_lease_left = leases[leases.size() - quorum_]};
  }
  absl::Duration soonest = absl::InfiniteDuration();
  for (const auto& [holder, leases] : refused_by) {
    for (absl::Duration d : leases) soonest = std::min(soonest, d);
  }
  // A master that did not answer may complete some owner's quorum: look
  // again when the first refusal's lease ends (a release wakes us sooner).
  if (!error.ok()) {
    return ::dlock::Attempt{
        .acquired = std::nullopt,
        .holder_lease_left =
            soonest == absl::InfiniteDuration() ? retry_delay_ : soonest};
  }
  *split = true;
  return ::dlock::Attempt{.acquired = std::nullopt,
                          .holder_lease_left = RandomDelay()};
}

std::optional<RedlockBackend::Agreed> RedlockBackend::AgreeOnToken(
    const AcquireCall& call, const RedlockHold* held,
    const std::vector<std::optional<Acquired>>& granted) {
  Agreed won;
  size_t reentered = 0;
  uint64_t reentered_token = 0;
  for (const std::optional<Acquired>& g : granted) {
    if (!g.has_value()) continue;
    won.acquired.fencing_token =
        std::max(won.acquired.fencing_token, g->fencing_token);
    won.acquired.hold_count = std::max(won.acquired.hold_count, g->hold_count);
    if (g->hold_count > 1) {
      ++reentered;
      reentered_token = std::max(reentered_token, g->fencing_token);
    }
  }
  // A re-entry of a hold taken in another client (an explicit owner, C6)
  // has no record here, and the masters know its token.
  won.fresh = reentered < quorum_;
  if (won.fresh) {
    won.acquired.hold_count = 1;
  } else {
    won.acquired.fencing_token =
        held != nullptr ? held->token() : reentered_token;
  }
  const uint64_t token = won.acquired.fencing_token;
  size_t agreeing = 0;
  for (const std::optional<Acquired>& g : granted) {
    if (g.has_value() && g->fencing_token == token) ++agreeing;
  }
  if (agreeing >= quorum_) return won;  // the usual case: one round trip
  Replies raised =
      OnEach([&](const Master& m, size_t i) -> std::optional<ScriptCall> {
        if (!granted[i].has_value() || granted[i]->fencing_token == token) {
          return std::nullopt;
        }
        return RaiseScript(m, call, token);
      });
  for (size_t i = 0; i < raised.size(); ++i) {
    if (raised[i].has_value() && raised[i]->ok() &&
        ParseRenew(raised[i]->value().get(), call.name, masters_[i]->endpoint())
            .ok()) {
      ++agreeing;
    }
  }
  if (agreeing >= quorum_) return won;
  return std::nullopt;
}

// What each master that granted a won round vouches for: the lease from
// the round's send time and, with liveness, the key it wrote in the same
// step (its chain).
void RedlockBackend::NoteGrants(
    RedlockLockHold& hold, MonoTime sent, absl::Duration lease,
    const std::vector<std::optional<Acquired>>& granted,
    const std::vector<MonoTime>& replied) {
  const MonoTime lease_until = sent + lease - drift_.Of(lease);
  for (size_t i = 0; i < granted.size(); ++i) {
    if (!granted[i].has_value()) continue;
    const uint64_t chain =
        KeepsLiveness() ? hold.chains().Confirm(
                              i, KeyWrite{.sent = sent, .replied = replied[i]})
                        : 0;
    hold.Granted(i, lease_until, chain, granted[i]->hold_count == 1);
  }
}

// Undoes a failed round on every master at once: where a master granted,
// it takes back the one hold this round added (a fresh key goes, a
// re-entry's count drops), never more, since the same owner may hold the
// lock through another client or thread (C6). A master that did not
// answer is left alone: whatever this round did there ends with its lease.
void RedlockBackend::GiveBack(
    const AcquireCall& call,
    const std::vector<std::optional<Acquired>>& granted) {
  (void)OnEach([&](const Master& m, size_t i) -> std::optional<ScriptCall> {
    if (!granted[i].has_value()) return std::nullopt;
    return GiveBackScript(m, call);
  });
}

// After a split vote: a random delay up to retry_delay, so that the
// clients that split it do not split the next round too.
absl::Duration RedlockBackend::RandomDelay() const {
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::uniform_int_distribution<int64_t> micros(
      0, absl::ToInt64Microseconds(retry_delay_));
  return absl::Microseconds(micros(random));
}

// Submits `make(master)` to every master, then awaits each: the round
// takes as long as the slowest master (bounded by operation_timeout).
// `make` gets the master and its index; nullopt asks that master nothing.
// `replied`, if given, gets the time each master's reply was in.
Replies RedlockBackend::OnEach(
    absl::FunctionRef<std::optional<ScriptCall>(const Master&, size_t)> make,
    std::vector<MonoTime>* replied) {
  std::vector<std::optional<Master::Pending>> pending(masters_.size());
  for (size_t i = 0; i < masters_.size(); ++i) {
    std::optional<ScriptCall> call = make(*masters_[i], i);
    if (!call.has_value()) continue;
    std::vector<ScriptCall> calls;
    calls.push_back(*std::move(call));
    pending[i].emplace(masters_[i]->Submit(std::move(calls)));
  }
  Replies out(masters_.size());
  if (replied != nullptr) replied->assign(masters_.size(), MonoTime());
  for (size_t i = 0; i < masters_.size(); ++i) {
    if (pending[i].has_value()) out[i] = std::move(pending[i]->Await()[0]);
    if (replied != nullptr) (*replied)[i] = clock_.Now();
  }
  return out;
}

absl::Status RedlockBackend::NoQuorum(absl::string_view what, size_t answered,
                                      const absl::Status& error) const {
  return absl::UnavailableError(
      absl::StrCat(what, " reached ", answered, " of ", masters_.size(),
                   " redlock masters, a quorum is ", quorum_,
                   error.ok() ? "" : absl::StrCat(": ", error.message())));
}

namespace {

absl::StatusOr<Drift> ParseDrift(UriParams& params) {
  Drift drift;
  if (std::optional<std::string> factor = params.TakeString("drift_factor")) {
    if (!absl::SimpleAtod(*factor, &drift.factor) || !(drift.factor >= 0) ||
        !(drift.factor < 0.5)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "drift_factor must be a number from 0 to below 0.5 (the share of "
          "the lease allowed for clock drift, 0.01 by default), not '",
          *factor, "'"));
    }
  }
  absl::StatusOr<std::optional<absl::Duration>> floor =
      params.TakeDuration("drift_floor");
  if (!floor.ok()) return floor.status();
  if (floor->has_value()) drift.floor = **floor;
  return drift;
}

absl::StatusOr<std::unique_ptr<Backend>> MakeRedlockBackend(
    const BackendConfig& config) {
  absl::StatusOr<std::vector<ConnectionConfig>> hosts =
      ParseHosts(config, kForm, kDefaultTimeout);
  if (!hosts.ok()) return hosts.status();
  absl::StatusOr<Drift> drift = ParseDrift(config.params);
  if (!drift.ok()) return drift.status();
  absl::StatusOr<std::optional<absl::Duration>> retry_delay =
      config.params.TakeDuration("retry_delay");
  if (!retry_delay.ok()) return retry_delay.status();
  if (absl::Status s = config.params.RejectUnknown(config.uri.scheme);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckHostCount(config.uri, kForm, 3, 15); !s.ok()) {
    return s;
  }
  Keyspace keys(config.lock_namespace, (*hosts)[0].db);
  Liveness liveness = ClientLiveness(config);
  auto backend = std::make_unique<RedlockBackend>(
      *hosts, std::move(keys), std::move(liveness), *drift,
      retry_delay->value_or(absl::Milliseconds(50)),
      config.options.fallback_poll, config.clock);
  if (absl::Status s = backend->Start(); !s.ok()) return s;
  return backend;
}

const bool kRegistered = RegisterBackend("redlock", &MakeRedlockBackend) &&
                         RegisterBackend("redlocks", &MakeRedlockBackend);

}  // namespace
}  // namespace dlock::redis
