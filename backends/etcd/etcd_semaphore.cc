// The etcd:// backend's semaphores (C22). Each owner's grant is a key of
// its own under the semaphore, "\x1fs<name>\x1fh<owner>" (HoldObjectName),
// on a lease of its own, its value a HoldValue whose value field holds N,
// the permits and the slots (EncodePermits): once granted, it is renewed,
// re-entered and released as a lock's writer is (the hold's lease, the
// client's liveness key, a Txn per change). A grant is one Txn that puts
// the key if no key of the semaphore changed since the read that counted
// the permits in use (a compare of the mod revision over the semaphore's
// whole range): so two grants that together exceed N cannot both commit.
// The grant's token is its create revision, which only grows.
//
// Head reservation (C22: a waiter for many permits is not starved by
// singles): the first waiter that cannot be served puts a place,
// "\x1fs<name>\x1fp", on a short lease renewed by its retries; while it
// lives, other owners are granted only what leaves the place's permits
// free. The grant of its owner deletes it in the same Txn; a waiter that
// gives up revokes its lease; one that dies lets it lapse.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/backend/rules.h"
#include "etcd_backend.h"

namespace dlock::etcd {
namespace {

// A semaphore's keys as one read found them.
struct SemaphoreRead {
  int64_t revision = 0;
  std::vector<const mvccpb::KeyValue*> holders;
  const mvccpb::KeyValue* place = nullptr;
};

SemaphoreRead Sort(const etcdserverpb::RangeResponse& range,
                   const std::string& place_key) {
  SemaphoreRead read{.revision = range.header().revision()};
  for (const mvccpb::KeyValue& kv : range.kvs()) {
    if (kv.key() == place_key) {
      read.place = &kv;
    } else {
      read.holders.push_back(&kv);
    }
  }
  return read;
}

// The permits part of a key of the semaphore, with its HoldValue.
struct Parsed {
  HoldValue hold;
  PermitsValue permits;
};
std::optional<Parsed> Parse(const mvccpb::KeyValue* kv) {
  if (kv == nullptr) return std::nullopt;
  std::optional<HoldValue> hold = Decode(kv->value());
  if (!hold.has_value()) return std::nullopt;
  std::optional<PermitsValue> permits = DecodePermits(hold->value);
  if (!permits.has_value()) return std::nullopt;
  return Parsed{*std::move(hold), *std::move(permits)};
}

// The lowest `count` slots in [0, limit) that no holder has.
std::vector<int64_t> FreeSlots(const std::set<int64_t>& taken, int64_t limit,
                               int64_t count) {
  std::vector<int64_t> out;
  for (int64_t slot = 0;
       slot < limit && static_cast<int64_t>(out.size()) < count; ++slot) {
    if (!taken.contains(slot)) out.push_back(slot);
  }
  return out;
}

}  // namespace

absl::StatusOr<Grant> EtcdBackend::AcquirePermits(const AcquireCall& call) {
  // Waiters wait on the semaphore's name, which every end of a grant (and
  // of the place) announces.
  const std::string semaphore = ObjectName(call.shape.kind, call.name);
  return AcquireOwnKey(call, semaphore,
                       [&](const AcquireCall& holder, Acquiring& a) {
                         return TryPermitsOnce(call, holder, a);
                       });
}

absl::StatusOr<Attempt> EtcdBackend::TryPermitsOnce(const AcquireCall& call,
                                                    const AcquireCall& holder,
                                                    Acquiring& a) {
  const std::string key = layout_.Key(holder.name);
  const std::string prefix = layout_.Key(SemaphorePrefix(call.name));
  const std::string place_key = layout_.Key(PlaceName(call.name));
  const int64_t limit = call.shape.limit, permits = call.shape.permits;
  for (int pass = 0; pass < kRounds; ++pass) {
    if (absl::Status s = ReadyAttempt(call.lease, a); !s.ok()) return s;
    absl::StatusOr<etcdserverpb::RangeResponse> response = RangeOf(prefix);
    if (!response.ok()) return response.status();
    const SemaphoreRead read = Sort(*response, place_key);
    int64_t used = 0;
    std::set<int64_t> taken;
    bool ended_stale = false;
    for (const mvccpb::KeyValue* kv : read.holders) {
      std::optional<Parsed> held = Parse(kv);
      if (!held.has_value()) continue;
      if (kv->key() == key) {
        if (call.owner_kind == OwnerKind::kThread) {
          // A grant the core gave up as lost, or whose reply never came:
          // ended (or changed meanwhile), so that the new one gets a token
          // of its own.
          absl::StatusOr<bool> ended = EndHold(*kv);
          if (!ended.ok()) return ended.status();
          ended_stale = true;
          break;
        }
        if (held->permits.permits != permits) {
          return PermitsMismatchError(call.name, held->permits.permits,
                                      permits);
        }
        // The owner holds it through another client (C6): one hold more.
        a.slots = held->permits.slots;
        return Reenter(holder, key, *kv, held->hold, a);
      }
      if (held->permits.limit != limit) {
        return LimitMismatchError(call.name, held->permits.limit, limit);
      }
      used += held->permits.permits;
      taken.insert(held->permits.slots.begin(), held->permits.slots.end());
    }
    if (ended_stale) continue;
    std::optional<Parsed> place = Parse(read.place);
    if (place.has_value() && place->permits.limit != limit) {
      return LimitMismatchError(call.name, place->permits.limit, limit);
    }
    const bool mine = place.has_value() && place->hold.owner == call.owner;
    const int64_t reserved =
        place.has_value() && !mine ? place->permits.permits : 0;
    if (used + permits + reserved > limit) {
      if (Now() < call.deadline && (!place.has_value() || mine)) {
        if (absl::Status s = KeepPlace(call, read.place, a); !s.ok()) return s;
      }
      return Attempt{};  // woken by the watch, or the fallback poll
    }
    const std::vector<int64_t> slots = FreeSlots(taken, limit, permits);
    HoldValue value = FreshHold(holder, a.live);
    value.value = EncodePermits(
        PermitsValue{.limit = limit, .permits = permits, .slots = slots});
    // Nothing of the semaphore changed since the read: no grant in between
    // took what this one counts as free.
    etcdserverpb::TxnRequest txn;
    etcdserverpb::Compare& unchanged = *txn.add_compare();
    unchanged.set_key(prefix);
    unchanged.set_range_end(PrefixEnd(prefix));
    unchanged.set_target(etcdserverpb::Compare::MOD);
    unchanged.set_result(etcdserverpb::Compare::LESS);
    unchanged.set_mod_revision(read.revision + 1);
    *txn.add_success() = PutOp(key, Encode(value), a.spare->id);
    if (mine) *txn.add_success() = DeleteOp(place_key);
    *txn.add_failure() = RangeOp(key);
    absl::StatusOr<etcdserverpb::TxnResponse> put = SendCreate(txn, a);
    if (!put.ok()) return put.status();
    if (std::optional<Attempt> won = Won(*put, a)) {
      a.slots = slots;
      return *won;
    }
  }
  return Attempt{.holder_lease_left = absl::ZeroDuration()};
}

absl::Status EtcdBackend::KeepPlace(const AcquireCall& call,
                                    const mvccpb::KeyValue* place,
                                    Acquiring& a) {
  if (place != nullptr && place->lease() == a.place_lease) {
    absl::StatusOr<LeaseState> kept = KeepAlive(a.place_lease);
    if (kept.ok() || !absl::IsNotFound(kept.status())) return kept.status();
    a.place_lease = 0;  // lapsed with its key: put again at the next look
    return absl::OkStatus();
  }
  // The owner's place through another client (C6), if any, stays its.
  if (place != nullptr) return absl::OkStatus();
  // Lives past this waiter's next looks (WaitingPlaceTtl; at least
  // etcd's shortest lease): a waiter that dies holds nobody back for long.
  if (a.place_lease == 0) {
    absl::StatusOr<LeaseState> lease =
        GrantLease(WaitingPlaceTtl(settings_.fallback_poll));
    if (!lease.ok()) return lease.status();
    a.place_lease = lease->id;
  }
  HoldValue value{
      .write_id = NewWriteId(),
      .value = EncodePermits(PermitsValue{.limit = call.shape.limit,
                                          .permits = call.shape.permits}),
      .owner = std::string(call.owner)};
  absl::StatusOr<etcdserverpb::TxnResponse> put =
      client_->Txn(CreateIfAbsent(layout_.Key(PlaceName(call.name)),
                                  Encode(value), a.place_lease),
                   {.idempotent = true});
  return put.status();
}

absl::StatusOr<ObjectInfo> EtcdBackend::InspectSemaphore(
    absl::string_view name) {
  const std::string prefix = layout_.Key(SemaphorePrefix(name));
  absl::StatusOr<etcdserverpb::RangeResponse> response = RangeOf(prefix);
  if (!response.ok()) return response.status();
  const SemaphoreRead read = Sort(*response, layout_.Key(PlaceName(name)));
  std::vector<std::string> ids;
  for (const mvccpb::KeyValue* kv : read.holders) {
    if (std::optional<Parsed> held = Parse(kv)) {
      ids.insert(ids.end(), held->hold.live.begin(), held->hold.live.end());
    }
  }
  absl::StatusOr<absl::flat_hash_set<std::string>> live =
      liveness_.LiveAmong(ids);
  if (!live.ok()) return live.status();
  ObjectInfo info{.kind = ObjectKind::kSemaphore, .name = std::string(name)};
  for (const mvccpb::KeyValue* kv : read.holders) {
    std::optional<Parsed> held = Parse(kv);
    if (!held.has_value()) continue;
    absl::StatusOr<LockInfo> one = Describe(name, *kv, *live);
    if (!one.ok()) return one.status();
    if (!one->locked) continue;  // its lease ended as we read it
    info.limit = held->permits.limit;
    info.holders.push_back(HolderOf(*one));
    info.holders.back().slots = held->permits.slots;
  }
  if (std::optional<Parsed> place = Parse(read.place)) {
    info.limit = place->permits.limit;
    info.waiter = WaiterInfo{.owner = place->hold.owner,
                             .permits = place->permits.permits};
  }
  return info;
}

absl::StatusOr<std::vector<ObjectInfo>> EtcdBackend::ListSemaphores(
    absl::string_view prefix) {
  const std::string from =
      layout_.Key(ObjectName(ObjectKind::kSemaphore, prefix));
  absl::StatusOr<etcdserverpb::RangeResponse> response =
      RangeOf(from, /*keys_only=*/true);
  if (!response.ok()) return response.status();
  std::set<std::string> names;  // in name order
  for (const mvccpb::KeyValue& kv : response->kvs()) {
    std::optional<absl::string_view> name = layout_.NameOf(kv.key());
    if (!name.has_value()) continue;
    std::optional<NamedObject> object = ParseObjectName(*name);
    if (object.has_value() && object->kind == ObjectKind::kSemaphore) {
      names.insert(std::string(object->name));
    }
  }
  std::vector<ObjectInfo> out;
  for (const std::string& name : names) {
    absl::StatusOr<ObjectInfo> info = InspectSemaphore(name);
    if (!info.ok()) return info.status();
    if (!info->holders.empty() || info->waiter.has_value()) {
      out.push_back(*std::move(info));
    }
  }
  return out;
}

absl::Status EtcdBackend::ForceUnlockSemaphore(
    absl::string_view name, std::optional<uint64_t> fencing_token) {
  absl::StatusOr<bool> found =
      EndHoldsUnder(layout_.Key(SemaphorePrefix(name)),
                    layout_.Key(PlaceName(name)), fencing_token);
  if (!found.ok()) return found.status();
  if (fencing_token.has_value() && !*found) {
    return TokenMismatchError(name, *fencing_token);
  }
  hub_.Notify(ObjectName(ObjectKind::kSemaphore, name));
  return absl::OkStatus();
}

}  // namespace dlock::etcd
