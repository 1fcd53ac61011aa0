// The etcd:// backend's acquisition, re-entry and renewal; etcd_release.cc
// has release, introspection and force unlock.
#include "etcd_backend.h"

#include <algorithm>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "etcd_leases.h"

namespace dlock::etcd {
namespace {

int64_t NowUnixMillis() { return absl::ToUnixMillis(absl::Now()); }

std::optional<std::string> LiveId(
    const std::optional<ClientLiveness::Record>& record) {
  if (!record.has_value()) return std::nullopt;
  return record->id;
}

std::string RandomHex() {
  absl::BitGen gen;
  return absl::StrFormat("%016x", absl::Uniform<uint64_t>(gen));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> EtcdBackend::Create(
    BackendSettings settings) {
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Create(settings.client);
  if (!client.ok()) return client.status();
  std::unique_ptr<EtcdBackend> backend(
      new EtcdBackend(std::move(settings), *std::move(client)));
  const std::string& prefix = backend->layout_.prefix();
  // One read, so that Connect() says at once when no member answers or
  // etcd refuses the user (as every backend's does).
  etcdserverpb::RangeRequest probe;
  probe.set_key(prefix);
  probe.set_range_end(PrefixEnd(prefix));
  probe.set_limit(1);
  probe.set_keys_only(true);
  if (absl::StatusOr<etcdserverpb::RangeResponse> read =
          backend->client_->Range(probe);
      !read.ok()) {
    return read.status();
  }
  return backend;
}

void EtcdBackend::StartWatch() {
  if (watching_.load(std::memory_order_acquire)) return;
  absl::MutexLock lock(&watch_mu_);
  if (shut_down_ || watch_ != nullptr) return;
  const std::string& prefix = layout_.prefix();
  watch_ = client_->StartWatch(
      {.key = prefix, .range_end = PrefixEnd(prefix)},
      [this](const WatchUpdate& update) { OnWatch(update); });
  watching_.store(true, std::memory_order_release);
}

absl::StatusOr<Attempt> EtcdBackend::Watched(absl::StatusOr<Attempt> attempt) {
  if (attempt.ok() && !attempt->acquired.has_value()) StartWatch();
  return attempt;
}

EtcdBackend::EtcdBackend(BackendSettings settings,
                         std::unique_ptr<Client> client)
    : settings_(std::move(settings)),
      clock_(*settings_.clock),
      layout_(settings_.lock_namespace),
      client_(std::move(client)),
      hub_(clock_),
      liveness_(*client_, hub_, clock_, settings_.liveness_id,
                settings_.liveness_ttl, settings_.fallback_poll),
      spares_(*client_, clock_, SpareLeases::Limits{}),
      write_id_prefix_(RandomHex()) {}

EtcdBackend::~EtcdBackend() { Shutdown(); }

absl::Status EtcdBackend::Contended(absl::string_view name,
                                    absl::string_view what) {
  return absl::UnavailableError(
      absl::StrCat("etcd: lock '", name, "' changed under every ", what, " (",
                   kRounds, " tries); the outcome is unknown"));
}

void EtcdBackend::Shutdown() {
  std::unique_ptr<Watch> watch;
  {
    absl::MutexLock lock(&watch_mu_);
    shut_down_ = true;
    watch = std::move(watch_);
  }
  if (watch != nullptr) watch->Cancel();
  liveness_.Shutdown();
  spares_.Shutdown();
}

BackendTraits EtcdBackend::Traits() const {
  return BackendTraits{.fifo_waiting = false,
                       .holds_tied_to_session = false,
                       .liveness_record = true,
                       .holds_survive_restart = true,
                       .fencing = FencingStrength::kDurable,
                       .can_list = true,
                       .shared_across_processes = true,
                       .keeps_after_release = true,
                       .semaphores = true,
                       .read_write_locks = true,
                       .elections = true,
                       .semaphore_order = WaiterOrder::kHeadReserved};
}

std::string EtcdBackend::NewWriteId() {
  return absl::StrCat(write_id_prefix_, "-", writes_.fetch_add(1) + 1);
}

void EtcdBackend::OnWatch(const WatchUpdate& update) {
  if (update.kind != WatchUpdate::Kind::kEvents) {
    // Started, compacted (events may be lost) or ended: everyone looks.
    hub_.NotifyAll();
    return;
  }
  for (const mvccpb::Event& event : update.events) {
    std::optional<absl::string_view> name = layout_.NameOf(event.kv().key());
    if (!name.has_value()) continue;
    // Observers of an election learn of every write: a new leader, a
    // proclaimed value (C24).
    std::optional<NamedObject> object = ParseObjectName(*name);
    bool wake = event.type() == mvccpb::Event::DELETE ||
                (object.has_value() && object->kind == ObjectKind::kElection);
    if (!wake) {
      // A lock kept after its release: its waiters learn when it ends.
      std::optional<HoldValue> value = Decode(event.kv().value());
      wake = value.has_value() && value->kept();
    }
    // A permit holder's or place's end wakes its semaphore's waiters.
    if (wake) {
      hub_.Notify(object.has_value() ? ObjectName(object->kind, object->name)
                                     : std::string(*name));
    }
  }
}

absl::StatusOr<Grant> EtcdBackend::Acquire(const AcquireCall& call) {
  switch (call.shape.kind) {
    case ObjectKind::kLock:
      if (call.shape.mode == HoldMode::kShared) return AcquireRead(call);
      break;
    case ObjectKind::kElection: {
      // A leadership is a lock's writer on the election's own key, carrying
      // the value (etcd_election.cc).
      const std::string object = ObjectName(call.shape.kind, call.name);
      return AcquireWriter(OnKey(call, object));
    }
    case ObjectKind::kSemaphore:
      return AcquirePermits(call);
  }
  return AcquireWriter(call);
}

absl::StatusOr<Grant> EtcdBackend::AcquireWriter(const AcquireCall& call) {
  const std::string key = layout_.Key(call.name);
  if (call.held != nullptr) {
    std::optional<absl::StatusOr<Grant>> again =
        ReenterKnown(call, key, *EtcdHold::Of(call.held));
    if (again.has_value()) return *std::move(again);
  }
  Acquiring a;
  absl::StatusOr<Grant> grant =
      AcquireWithWakeups(call, hub_, settings_.fallback_poll,
                         [&] { return Watched(TryOnce(call, key, a)); });
  PutSpareBack(call.lease, a);
  // The intent, if this writer put one and did not end it by its grant.
  if (a.place_lease != 0) RevokeQuietly(a.place_lease);
  if (!grant.ok()) return grant.status();
  return Granted(call, a, *std::move(grant));
}

void EtcdBackend::PutSpareBack(absl::Duration lease, Acquiring& a) {
  if (!a.spare.has_value()) return;
  // Never on a key: another acquisition may use it (etcd_spares.h).
  if (a.spare_maybe_used) {
    RevokeQuietly(a.spare->id);
  } else {
    spares_.Return(lease, *a.spare);
  }
  a.spare.reset();
}

Grant EtcdBackend::Granted(const AcquireCall& call, Acquiring& a, Grant grant) {
  // The core counts the hold's lease and this client's liveness from
  // Grant::sent: the attempt's sending, if both were kept alive since (a
  // waiter's were last kept alive before its wait); else from when they
  // last were.
  const absl::Duration slack = Slack(call.lease);
  grant.sent = std::min({grant.sent,
                         HoldCountsFrom(*a.record, a.sent, grant.sent, slack),
                         liveness_.CountsFrom(a.live, grant.sent, slack)});
  grant.record = std::move(a.record);
  return grant;
}

absl::Duration EtcdBackend::Slack(absl::Duration lease) const {
  // Amortized: a client granting holds back to back sends one keepalive
  // per tenth, and its holds are believed at most a tenth shorter.
  return std::min(lease, settings_.liveness_ttl) / 10;
}

MonoTime EtcdBackend::HoldCountsFrom(EtcdHold& record, MonoTime confirmed,
                                     MonoTime sent, absl::Duration slack) {
  if (confirmed >= sent - slack) return confirmed;
  // Sent after the grant: the lease outlives `sent` plus its TTL.
  absl::StatusOr<LeaseState> kept = KeepAlive(record.lease().id);
  if (!kept.ok()) return confirmed;
  record.Update(*kept);
  return sent;
}

absl::Status EtcdBackend::RenewLiveness(absl::Duration ttl) {
  return liveness_.Renew(ttl);
}

absl::Status EtcdBackend::ReadySpare(absl::Duration lease, Acquiring& a) {
  if (a.spare.has_value()) {
    const LeaseState& spare = *a.spare;
    const MonoTime now = Now();
    // Fresh enough: the core counts the hold's lease from the lease's last
    // confirmation, so an old one would give a hold believed only briefly.
    if (spare.alive_until - spare.ttl + spare.ttl / 4 > now) {
      return absl::OkStatus();
    }
    // etcd answers the keepalive of a lease it let run out only once it
    // revoked it (its expiry check runs every half second): a waiter whose
    // wait outlasted its spare would look that much late after a wake-up,
    // and lose the lock to any caller with a fresh one. Such a spare is
    // left to lapse (no create named it: it carries no key).
    if (spare.alive_until - now > spare.ttl / 4 || a.spare_maybe_used) {
      absl::StatusOr<LeaseState> kept = KeepAlive(spare.id);
      if (kept.ok()) {
        a.spare = *kept;
        return absl::OkStatus();
      }
      if (!absl::IsNotFound(kept.status())) return kept.status();
    }
    a.spare.reset();
    a.spare_maybe_used = false;
  }
  // A spare granted ahead: its confirmation is recent enough that the core
  // counts the hold from it without a keepalive (HoldCountsFrom).
  a.spare = spares_.Take(lease, Slack(lease));
  if (a.spare.has_value()) return absl::OkStatus();
  absl::StatusOr<LeaseState> granted = GrantLease(lease);
  if (!granted.ok()) return granted.status();
  a.spare = *granted;
  return absl::OkStatus();
}

HoldValue EtcdBackend::FreshHold(
    const AcquireCall& call,
    const std::optional<ClientLiveness::Record>& live) {
  HoldValue value{.holds = 1,
                  .lease_ms = LeaseMillis(call.lease),
                  .since_ms = NowUnixMillis(),
                  .write_id = NewWriteId(),
                  .value = std::string(call.value),
                  .owner = std::string(call.owner)};
  AddLiveness(value, LiveId(live), /*fresh=*/true);
  return value;
}

absl::StatusOr<Attempt> EtcdBackend::TryOnce(const AcquireCall& call,
                                             const std::string& key,
                                             Acquiring& a) {
  // Another pass only after ending a stale hold of the same thread, or a
  // hold whose clients' liveness lapsed.
  for (int pass = 0;; ++pass) {
    if (absl::Status s = ReadyAttempt(call.lease, a); !s.ok()) return s;
    etcdserverpb::TxnRequest create =
        CreateIfAbsent(key, Encode(FreshHold(call, a.live)), a.spare->id);
    if (call.shape.IsLockWriter()) AddNoReaders(call.name, a, create);
    absl::StatusOr<etcdserverpb::TxnResponse> response = SendCreate(create, a);
    if (!response.ok()) return response.status();
    if (std::optional<Attempt> won = Won(*response, a)) return *won;
    // A compare that failed reads the key in the same revision.
    const mvccpb::KeyValue* kv = ReadKey(*response);
    if (kv == nullptr) {
      if (!call.shape.IsLockWriter()) {
        return Attempt{.holder_lease_left = absl::ZeroDuration()};
      }
      absl::StatusOr<std::optional<Attempt>> readers = ReadersInTheWay(call, a);
      if (!readers.ok()) return readers.status();
      if (readers->has_value()) return **readers;
      if (pass < kRounds) continue;
      return Attempt{.holder_lease_left = absl::ZeroDuration()};
    }
    std::optional<HoldValue> held = Decode(kv->value());
    if (held.has_value() && held->kept()) {
      absl::StatusOr<absl::Duration> left = KeptLeft(*kv, *held, a);
      if (!left.ok()) return left.status();
      return Attempt{.holder_lease_left = *left};
    }
    if (!held.has_value()) return Attempt{};
    if (held->owner != call.owner) {
      if (held->live.empty()) return Attempt{};
      absl::StatusOr<bool> ended =
          TakeOver(call, key, *kv, *held, response->header().revision());
      if (!ended.ok()) return ended.status();
      if (!*ended) return Attempt{};
      if (pass < kRounds) continue;
      return Attempt{.holder_lease_left = absl::ZeroDuration()};
    }
    if (call.owner_kind == OwnerKind::kThread) {
      // A thread's holds are this client's alone, and the core believes
      // none here: this is a hold it gave up as lost (etcd restarted its
      // lease with the whole TTL) or whose grant never reached it. Ended,
      // so that the new hold gets a token of its own (or changed meanwhile,
      // then looked at again).
      absl::StatusOr<bool> ended = EndHold(*kv);
      if (!ended.ok()) return ended.status();
      if (pass == 0) continue;
      return Attempt{.holder_lease_left = absl::ZeroDuration()};
    }
    return Reenter(call, key, *kv, *held, a);
  }
}

absl::StatusOr<Attempt> EtcdBackend::Reenter(const AcquireCall& call,
                                             const std::string& key,
                                             const mvccpb::KeyValue& kv,
                                             const HoldValue& held,
                                             Acquiring& a) {
  // The owner holds it through another client (C6): one hold more.
  absl::StatusOr<std::optional<Reentered>> reentered =
      AddHold(call, key, kv, held, nullptr, a.live);
  if (!reentered.ok()) return reentered.status();
  if (!reentered->has_value()) {
    return Attempt{.holder_lease_left = absl::ZeroDuration()};
  }
  a.record =
      std::make_shared<EtcdHold>(kv.create_revision(), (*reentered)->lease);
  return Attempt{.acquired =
                     Acquired{static_cast<uint64_t>(kv.create_revision()),
                              (*reentered)->holds}};
}

absl::StatusOr<absl::Duration> EtcdBackend::KeptLeft(const mvccpb::KeyValue& kv,
                                                     const HoldValue& value,
                                                     Acquiring& a) {
  const MonoTime now = Now();
  if (a.kept.mod_revision != kv.mod_revision()) {
    // Written no later than this reply came: the keep ends after it.
    a.kept = KeptSeen{.mod_revision = kv.mod_revision(), .seen = now};
  }
  const absl::Duration keep = absl::Milliseconds(value.lease_ms);
  const absl::Duration left = a.kept.seen + keep + DriftMargin(keep) - now;
  if (left > absl::ZeroDuration()) return left;
  // Over: etcd's lease, in whole seconds checked every half second, may
  // still run a while. It carries this kept key alone.
  absl::Status revoked = client_->LeaseRevoke(kv.lease());
  if (!revoked.ok() && !absl::IsNotFound(revoked)) return revoked;
  return absl::ZeroDuration();
}

absl::StatusOr<std::optional<EtcdBackend::Reentered>> EtcdBackend::AddHold(
    const AcquireCall& call, const std::string& key, const mvccpb::KeyValue& kv,
    HoldValue value, const EtcdHold* record,
    const std::optional<ClientLiveness::Record>& live) {
  LeaseState lease;
  if (record != nullptr && record->lease().id == kv.lease()) {
    lease = record->lease();
  } else {
    absl::StatusOr<LeaseState> known = LeaseOf(kv);
    if (absl::IsNotFound(known.status())) return std::nullopt;
    if (!known.ok()) return known.status();
    lease = *known;
  }
  value.holds += 1;
  value.lease_ms = std::max(value.lease_ms, LeaseMillis(call.lease));
  if (call.shape.kind == ObjectKind::kElection) {
    value.value = std::string(call.value);  // a leader's re-entry proclaims it
  }
  AddLiveness(value, LiveId(live), /*fresh=*/false);
  if (call.lease > lease.ttl) {
    absl::StatusOr<std::optional<LeaseState>> moved =
        MoveToLongerLease(key, kv, value, call.lease);
    if (!moved.ok()) return moved.status();
    if (!moved->has_value()) return std::nullopt;
    return Reentered{.holds = value.holds, .lease = **moved};
  }
  absl::StatusOr<bool> written = Overwrite(key, kv, value, 0);
  if (!written.ok()) return written.status();
  if (!*written) return std::nullopt;
  // The lease is the larger of what remains and what is asked (C5).
  if (lease.alive_until < Now() + call.lease) {
    absl::StatusOr<LeaseState> kept = KeepAlive(lease.id);
    if (absl::IsNotFound(kept.status())) return std::nullopt;
    if (!kept.ok()) return kept.status();
    lease = *kept;
  }
  return Reentered{.holds = value.holds, .lease = lease};
}

std::optional<absl::StatusOr<Grant>> EtcdBackend::ReenterKnown(
    const AcquireCall& call, const std::string& key, EtcdHold& record) {
  const MonoTime sent = Now();
  absl::StatusOr<std::optional<ClientLiveness::Record>> live =
      liveness_.ForGrant();
  if (!live.ok()) return absl::StatusOr<Grant>(live.status());
  for (int round = 0; round < kRounds; ++round) {
    absl::StatusOr<std::optional<mvccpb::KeyValue>> kv = Get(key);
    if (!kv.ok()) return absl::StatusOr<Grant>(kv.status());
    if (!kv->has_value() ||
        (*kv)->create_revision() != record.create_revision()) {
      return std::nullopt;
    }
    std::optional<HoldValue> value = Decode((*kv)->value());
    if (!value.has_value() || value->owner != call.owner) return std::nullopt;
    absl::StatusOr<std::optional<Reentered>> reentered =
        AddHold(call, key, **kv, *value, &record, *live);
    if (!reentered.ok()) return absl::StatusOr<Grant>(reentered.status());
    if (!reentered->has_value()) continue;
    record.Update((*reentered)->lease);
    return absl::StatusOr<Grant>(
        Grant{.fencing_token = record.fencing_token(),
              .hold_count = (*reentered)->holds,
              .sent = std::min(
                  sent, liveness_.CountsFrom(*live, sent, Slack(call.lease)))});
  }
  return absl::StatusOr<Grant>(Contended(call.name, "re-entry"));
}

absl::StatusOr<std::optional<LeaseState>> EtcdBackend::MoveToLongerLease(
    const std::string& key, const mvccpb::KeyValue& kv, HoldValue value,
    absl::Duration lease) {
  absl::StatusOr<LeaseState> fresh = GrantLease(lease);
  if (!fresh.ok()) return fresh.status();
  absl::StatusOr<bool> moved = Overwrite(key, kv, value, fresh->id);
  if (!moved.ok() || !*moved) {
    RevokeQuietly(fresh->id);
    if (!moved.ok()) return moved.status();
    return std::nullopt;
  }
  RevokeQuietly(kv.lease());  // it carries no key now
  return *fresh;
}

absl::Status EtcdBackend::Renew(const RenewCall& call) {
  return RenewMany(absl::MakeConstSpan(&call, 1)).front();
}

std::vector<absl::Status> EtcdBackend::RenewMany(
    absl::Span<const RenewCall> calls) {
  // Each call on its hold's own key (OnKey), whose names must stay put.
  std::vector<std::string> key_names;
  key_names.reserve(calls.size());
  std::vector<RenewCall> keyed;
  keyed.reserve(calls.size());
  for (const RenewCall& call : calls) {
    if (call.shape.IsLockWriter()) {
      keyed.push_back(call);
    } else {
      key_names.push_back(HoldObjectName(call.shape, call.name, call.owner));
      keyed.push_back(OnKey(call, key_names.back()));
    }
  }
  // Holds a keepalive renews: sent together, so that a round of many holds
  // waits once (LeaseKeeper::KeepAliveEach), not once per hold.
  std::vector<size_t> by_keepalive;
  std::vector<int64_t> leases;
  for (size_t i = 0; i < keyed.size(); ++i) {
    if (std::optional<int64_t> lease = LeaseToKeepAlive(keyed[i])) {
      by_keepalive.push_back(i);
      leases.push_back(*lease);
    }
  }
  const std::vector<absl::StatusOr<LeaseState>> kept =
      KeepLeasesAlive(*client_, clock_, leases,
                      MonotonicNow() + client_->options().call_timeout);
  std::vector<absl::Status> results;
  results.reserve(calls.size());
  std::vector<size_t> renewed;  // known holds whose keepalive succeeded
  size_t next = 0;
  for (size_t i = 0; i < keyed.size(); ++i) {
    const RenewCall& call = keyed[i];
    if (next < by_keepalive.size() && by_keepalive[next] == i) {
      results.push_back(
          AfterKeepAlive(call, EtcdHold::Of(call.record), kept[next]));
      ++next;
    } else {
      results.push_back(RenewByReading(
          call, call.record == nullptr ? nullptr : EtcdHold::Of(call.record)));
    }
    if (results.back().ok() && call.record != nullptr) renewed.push_back(i);
  }
  for (size_t from = 0; from < renewed.size(); from += kReadsPerTxn) {
    ConfirmKeys(calls, keyed,
                absl::MakeConstSpan(renewed).subspan(from, kReadsPerTxn),
                results);
  }
  return results;
}

void EtcdBackend::ConfirmKeys(absl::Span<const RenewCall> calls,
                              absl::Span<const RenewCall> keyed,
                              absl::Span<const size_t> renewed,
                              std::vector<absl::Status>& results) {
  // After the keepalives: a key there now was there as its lease was kept
  // alive. A lease lives on past a force unlock that deleted its key and
  // could not revoke it (EndHold), or a key deleted by hand.
  etcdserverpb::TxnRequest reads;
  for (size_t i : renewed) {
    *reads.add_success() = RangeOp(layout_.Key(keyed[i].name));
  }
  absl::StatusOr<etcdserverpb::TxnResponse> read =
      client_->Txn(reads, {.idempotent = true});
  for (size_t j = 0; j < renewed.size(); ++j) {
    const RenewCall& call = calls[renewed[j]];
    absl::Status& result = results[renewed[j]];
    if (!read.ok()) {
      result = read.status();  // not confirmed: renewed at the next round
      continue;
    }
    const etcdserverpb::RangeResponse& range =
        read->responses(static_cast<int>(j)).response_range();
    // Its lease is left alone: a release racing this round may have given
    // it to the client's next hold (ReleaseWhole).
    if (range.kvs_size() == 0 ||
        range.kvs(0).create_revision() !=
            EtcdHold::Of(call.record)->create_revision()) {
      result = NotOwnerError(call.name);
    }
  }
}

std::optional<int64_t> EtcdBackend::LeaseToKeepAlive(const RenewCall& call) {
  if (call.record == nullptr) return std::nullopt;
  // A keepalive restores the lease's TTL: the kept maximum (C5). A longer
  // lease asked moves the hold to a new lease (RenewByReading).
  const LeaseState lease = EtcdHold::Of(call.record)->lease();
  if (call.lease > lease.ttl) return std::nullopt;
  return lease.id;
}

absl::Status EtcdBackend::AfterKeepAlive(
    const RenewCall& call, EtcdHold* record,
    const absl::StatusOr<LeaseState>& kept) {
  if (kept.ok()) {
    record->Update(*kept);
    return absl::OkStatus();
  }
  if (!absl::IsNotFound(kept.status())) return kept.status();
  return RenewByReading(call, record);  // the lease is gone: look at the key
}

absl::Status EtcdBackend::RenewByReading(const RenewCall& call,
                                         EtcdHold* record) {
  const std::string key = layout_.Key(call.name);
  for (int round = 0; round < kRounds; ++round) {
    absl::StatusOr<std::optional<mvccpb::KeyValue>> kv = Get(key);
    if (!kv.ok()) return kv.status();
    std::optional<HoldValue> value =
        kv->has_value() ? Decode((*kv)->value()) : std::nullopt;
    if (!value.has_value() || value->owner != call.owner ||
        (record != nullptr &&
         (*kv)->create_revision() != record->create_revision())) {
      return NotOwnerError(call.name);
    }
    absl::StatusOr<LeaseState> lease = LeaseOf(**kv);
    if (absl::IsNotFound(lease.status())) continue;
    if (!lease.ok()) return lease.status();
    std::optional<LeaseState> renewed;
    if (call.lease > lease->ttl) {
      value->lease_ms = std::max(value->lease_ms, LeaseMillis(call.lease));
      absl::StatusOr<std::optional<LeaseState>> moved =
          MoveToLongerLease(key, **kv, *value, call.lease);
      if (!moved.ok()) return moved.status();
      renewed = *moved;
    } else {
      absl::StatusOr<LeaseState> kept = KeepAlive(lease->id);
      if (!kept.ok() && !absl::IsNotFound(kept.status())) {
        return kept.status();
      }
      if (kept.ok()) renewed = *kept;
    }
    if (!renewed.has_value()) continue;
    if (record != nullptr) record->Update(*renewed);
    return absl::OkStatus();
  }
  return Contended(call.name, "renewal");
}

}  // namespace dlock::etcd
