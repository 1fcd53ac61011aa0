// The etcd:// backend's read-write locks (C23). The writer is the lock's
// own key, as ever. Each reader's hold is a key of its own beside it,
// "\x1fr<name>\x1fh<owner>" (HoldObjectName), on a lease of its own:
// renewed, re-entered and released as a lock's writer is. A reader is
// granted by one Txn that compares the writer's key (absent, or this
// owner's own write: a writer may read, with the writer's token) and the
// writer's intent (absent), and puts the reader's key; a writer's create
// also compares that no reader's key exists (AddNoReaders).
//
// Writer starvation: the first writer kept out by readers puts its intent,
// "\x1fr<name>\x1fp", on a short lease renewed by its retries; while it
// lives no new reader is granted (a reader's re-entry is), nor another
// writer, and when the last reader leaves the writer's create deletes the
// intent in the same Txn. A writer that gives up revokes it; one that dies
// lets it lapse. A read-to-write upgrade through an owner token that reads
// elsewhere is refused at once (UpgradeRefused), never waited for.
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/backend/rules.h"
#include "etcd_backend.h"

namespace dlock::etcd {
namespace {

etcdserverpb::Compare CompareMod(const std::string& key, int64_t mod) {
  etcdserverpb::Compare same;
  same.set_key(key);
  same.set_target(etcdserverpb::Compare::MOD);
  same.set_result(etcdserverpb::Compare::EQUAL);
  same.set_mod_revision(mod);
  return same;
}

// The fencing token a reader's value carries: the writer's, for a writer's
// own read; else its key's create revision (0 here).
uint64_t TokenIn(const HoldValue& reader) {
  uint64_t token = 0;
  if (!absl::SimpleAtoi(reader.value, &token)) return 0;
  return token;
}

}  // namespace

absl::StatusOr<Grant> EtcdBackend::AcquireRead(const AcquireCall& call) {
  // Waiters wait on the lock's name: the writer's end, a reader's and the
  // intent's are announced on it.
  return AcquireOwnKey(call, call.name,
                       [&](const AcquireCall& reader, Acquiring& a) {
                         return TryReadOnce(reader, a);
                       });
}

absl::StatusOr<Attempt> EtcdBackend::TryReadOnce(const AcquireCall& reader,
                                                 Acquiring& a) {
  const absl::string_view lock = ParseObjectName(reader.name)->name;
  const std::string key = layout_.Key(reader.name);
  const std::string writer_key = layout_.Key(lock);
  const std::string intent_key = layout_.Key(IntentName(lock));
  for (int pass = 0; pass < kRounds; ++pass) {
    if (absl::Status s = ReadyAttempt(reader.lease, a); !s.ok()) return s;
    // One round trip, as a writer's create: a look before the put would let
    // every writer woken with this reader in first, and readers would
    // seldom get in together while writers wait on one another.
    etcdserverpb::TxnRequest txn;
    for (const std::string* absent : {&writer_key, &intent_key, &key}) {
      *txn.add_compare() =
          CompareCreateRevision(*absent, etcdserverpb::Compare::EQUAL, 0);
    }
    *txn.add_success() =
        PutOp(key, Encode(FreshHold(reader, a.live)), a.spare->id);
    // Refused: the three in one revision, this owner's read first (Won()
    // knows a retried grant by its key on the spare lease).
    for (const std::string* read : {&key, &writer_key, &intent_key}) {
      *txn.add_failure() = RangeOp(*read);
    }
    absl::StatusOr<etcdserverpb::TxnResponse> put = SendCreate(txn, a);
    if (!put.ok()) return put.status();
    if (std::optional<Attempt> won = Won(*put, a)) return *won;
    auto found = [&](int i) -> const mvccpb::KeyValue* {
      const auto& kvs = put->responses(i).response_range().kvs();
      return kvs.empty() ? nullptr : &kvs[0];
    };
    const mvccpb::KeyValue* mine = found(0);
    const mvccpb::KeyValue* writer = found(1);
    const mvccpb::KeyValue* intent = found(2);
    if (mine != nullptr) {
      absl::StatusOr<std::optional<Attempt>> again =
          OwnReadFound(reader, key, *mine, a);
      if (!again.ok()) return again.status();
      if (again->has_value()) return **again;
      continue;
    }
    if (writer == nullptr && intent == nullptr) continue;  // gone meanwhile
    std::optional<HoldValue> write =
        writer != nullptr ? Decode(writer->value()) : std::nullopt;
    // Another writer (or a lock kept after its release), or a waiting
    // writer's intent: wait, woken by its end.
    if (!write.has_value() || write->kept() || write->owner != reader.owner) {
      return Attempt{};
    }
    absl::StatusOr<std::optional<Attempt>> own =
        ReadOwnWrite(reader, key, *writer, a);
    if (!own.ok()) return own.status();
    if (own->has_value()) return **own;
  }
  return Attempt{.holder_lease_left = absl::ZeroDuration()};
}

absl::StatusOr<std::optional<Attempt>> EtcdBackend::OwnReadFound(
    const AcquireCall& reader, const std::string& key,
    const mvccpb::KeyValue& mine, Acquiring& a) {
  std::optional<HoldValue> held = Decode(mine.value());
  if (held.has_value() && reader.owner_kind == OwnerKind::kToken) {
    // Held through another client (C6): one hold more, its token kept.
    absl::StatusOr<Attempt> again = Reenter(reader, key, mine, *held, a);
    if (!again.ok()) return again.status();
    const uint64_t token = TokenIn(*held);
    if (again->acquired.has_value() && token != 0) {
      again->acquired->fencing_token = token;
      a.record = std::make_shared<EtcdHold>(mine.create_revision(),
                                            a.record->lease(), token);
    }
    return *again;
  }
  // A read the core gave up as lost, or whose reply never came: ended
  // (or changed meanwhile), then looked at again.
  absl::StatusOr<bool> ended = EndHold(mine);
  if (!ended.ok()) return ended.status();
  return std::nullopt;
}

absl::StatusOr<std::optional<Attempt>> EtcdBackend::ReadOwnWrite(
    const AcquireCall& reader, const std::string& key,
    const mvccpb::KeyValue& writer, Acquiring& a) {
  // A writer may read, whatever intent waits, with the writer's token:
  // granted while its write is that one still.
  const uint64_t token = static_cast<uint64_t>(writer.create_revision());
  HoldValue value = FreshHold(reader, a.live);
  value.value = absl::StrCat(token);
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() = CompareMod(writer.key(), writer.mod_revision());
  *txn.add_compare() =
      CompareCreateRevision(key, etcdserverpb::Compare::EQUAL, 0);
  *txn.add_success() = PutOp(key, Encode(value), a.spare->id);
  *txn.add_failure() = RangeOp(key);
  absl::StatusOr<etcdserverpb::TxnResponse> put = SendCreate(txn, a);
  if (!put.ok()) return put.status();
  return Won(*put, a, token);
}

void EtcdBackend::AddNoReaders(absl::string_view lock, const Acquiring& a,
                               etcdserverpb::TxnRequest& txn) {
  // Expecting no intent either, one compare covers the readers and the
  // intent (a compare less for etcd to evaluate on every uncontended grant).
  const std::string none_under = layout_.Key(
      a.intent_mod == 0 ? ReadersAndIntentPrefix(lock) : ReadersPrefix(lock));
  etcdserverpb::Compare& none = *txn.add_compare();
  none.set_key(none_under);
  none.set_range_end(PrefixEnd(none_under));
  none.set_target(etcdserverpb::Compare::CREATE);
  none.set_result(etcdserverpb::Compare::EQUAL);
  none.set_create_revision(0);
  if (a.intent_mod != 0) {
    // This writer's own intent: the grant ends it.
    const std::string intent = layout_.Key(IntentName(lock));
    *txn.add_compare() = CompareMod(intent, a.intent_mod);
    *txn.add_success() = DeleteOp(intent);
  }
}

absl::StatusOr<std::optional<Attempt>> EtcdBackend::ReadersInTheWay(
    const AcquireCall& call, Acquiring& a) {
  absl::StatusOr<etcdserverpb::RangeResponse> readers =
      RangeOf(layout_.Key(ReadersPrefix(call.name)));
  if (!readers.ok()) return readers.status();
  const std::string mine = layout_.Key(HoldObjectName(
      HoldShape{.mode = HoldMode::kShared}, call.name, call.owner));
  for (const mvccpb::KeyValue& kv : readers->kvs()) {
    if (kv.key() != mine) continue;
    if (call.owner_kind == OwnerKind::kToken) {
      return UpgradeRefusedError(call.name);
    }
    // A thread's read the core does not believe (lost): ended (or changed
    // meanwhile), then looked at again.
    absl::StatusOr<bool> ended = EndHold(kv);
    if (!ended.ok()) return ended.status();
    return std::nullopt;
  }
  const bool read = readers->kvs_size() > 0;
  absl::StatusOr<std::optional<mvccpb::KeyValue>> intent =
      Get(layout_.Key(IntentName(call.name)));
  if (!intent.ok()) return intent.status();
  a.intent_mod = 0;
  if (intent->has_value()) {
    if ((*intent)->lease() != a.place_lease) return Attempt{};  // another's
    absl::StatusOr<LeaseState> kept = KeepAlive(a.place_lease);
    if (absl::IsNotFound(kept.status())) {
      a.place_lease = 0;
      return std::nullopt;
    }
    if (!kept.ok()) return kept.status();
    if (read) return Attempt{};
    a.intent_mod = (*intent)->mod_revision();  // handed over: take it
    return std::nullopt;
  }
  if (!read) return std::nullopt;
  if (Now() < call.deadline) {
    if (absl::Status s = PutIntent(call, a); !s.ok()) return s;
  }
  return Attempt{};
}

absl::Status EtcdBackend::PutIntent(const AcquireCall& call, Acquiring& a) {
  // Lives past this writer's next looks (WaitingPlaceTtl; at least
  // etcd's shortest lease).
  if (a.place_lease == 0) {
    absl::StatusOr<LeaseState> lease =
        GrantLease(WaitingPlaceTtl(settings_.fallback_poll));
    if (!lease.ok()) return lease.status();
    a.place_lease = lease->id;
  }
  const HoldValue value{.write_id = NewWriteId(),
                        .owner = std::string(call.owner)};
  return client_
      ->Txn(CreateIfAbsent(layout_.Key(IntentName(call.name)), Encode(value),
                           a.place_lease),
            {.idempotent = true})
      .status();
}

absl::StatusOr<ObjectInfo> EtcdBackend::InspectLock(absl::string_view name) {
  absl::StatusOr<ObjectInfo> info =
      Backend::InspectObject(ObjectKind::kLock, name);
  if (!info.ok()) return info.status();
  absl::StatusOr<etcdserverpb::RangeResponse> readers =
      RangeOf(layout_.Key(ReadersPrefix(name)));
  if (!readers.ok()) return readers.status();
  std::vector<std::string> ids;
  for (const mvccpb::KeyValue& kv : readers->kvs()) {
    if (std::optional<HoldValue> value = Decode(kv.value())) {
      ids.insert(ids.end(), value->live.begin(), value->live.end());
    }
  }
  absl::StatusOr<absl::flat_hash_set<std::string>> live =
      liveness_.LiveAmong(ids);
  if (!live.ok()) return live.status();
  for (const mvccpb::KeyValue& kv : readers->kvs()) {
    absl::StatusOr<LockInfo> one = Describe(name, kv, *live);
    if (!one.ok()) return one.status();
    if (!one->locked) continue;
    std::optional<HoldValue> value = Decode(kv.value());
    info->holders.push_back(HolderOf(*one));
    info->holders.back().shared = true;
    if (value.has_value() && TokenIn(*value) != 0) {
      info->holders.back().fencing_token = TokenIn(*value);
    }
  }
  absl::StatusOr<std::optional<mvccpb::KeyValue>> intent =
      Get(layout_.Key(IntentName(name)));
  if (!intent.ok()) return intent.status();
  if (intent->has_value()) {
    if (std::optional<HoldValue> value = Decode((*intent)->value())) {
      info->waiter = WaiterInfo{.owner = value->owner, .permits = 1};
    }
  }
  return info;
}

absl::StatusOr<bool> EtcdBackend::EndHoldsUnder(
    const std::string& prefix, const std::string& except,
    std::optional<uint64_t> fencing_token) {
  bool found = false;
  for (int round = 0; round < kRounds; ++round) {
    absl::StatusOr<etcdserverpb::RangeResponse> range = RangeOf(prefix);
    if (!range.ok()) return range.status();
    bool changed = false;
    for (const mvccpb::KeyValue& kv : range->kvs()) {
      if (kv.key() == except) continue;
      if (fencing_token.has_value()) {
        std::optional<HoldValue> value = Decode(kv.value());
        const bool carries =
            static_cast<uint64_t>(kv.create_revision()) == *fencing_token ||
            (value.has_value() && TokenIn(*value) == *fencing_token);
        if (!carries) continue;
      }
      absl::StatusOr<bool> ended = EndHold(kv);
      if (!ended.ok()) return ended.status();
      // Re-entered or ended since the read: read them again.
      changed = changed || !*ended;
      found = found || *ended;
    }
    if (!changed) return found;
  }
  return Contended(prefix, "force unlock");
}

absl::Status EtcdBackend::ForceUnlockLock(
    absl::string_view name, std::optional<uint64_t> fencing_token) {
  absl::Status writer = EndHolder(name, fencing_token);
  if (!writer.ok() && !IsTokenMismatch(writer)) return writer;
  // Its readers too (with the token: the reader that carries it, or the
  // writer's own read).
  absl::StatusOr<bool> readers =
      EndHoldsUnder(layout_.Key(ReadersPrefix(name)), "", fencing_token);
  if (!readers.ok()) return readers.status();
  hub_.Notify(name);
  if (!writer.ok() && !*readers) return writer;  // nothing carries the token
  return absl::OkStatus();
}

}  // namespace dlock::etcd
