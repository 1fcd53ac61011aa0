// Copyright dlock authors. How the etcd:// backend lays locks out in etcd:
//   /dlock/<namespace>/<lock name>
// one key per held lock, on a lease of its own (etcd_backend.h), whose value
// is a HoldValue. In the namespace '%' and '/' are escaped (%25, %2F), so the
// first '/' after it ends it and two namespaces never share a key (C16).
//   /dlock/%live/<liveness id>
// one key per client that holds locks, on a lease of liveness_ttl
// (etcd_liveness.h): no escaped namespace starts "%l", so it is no
// namespace's.
#ifndef DLOCK_BACKENDS_ETCD_ETCD_LAYOUT_H_
#define DLOCK_BACKENDS_ETCD_ETCD_LAYOUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "dlock/backend/backend.h"
#include "dlock/object_info.h"

namespace dlock::etcd {

class Layout {
 public:
  explicit Layout(absl::string_view lock_namespace);

  // "/dlock/<namespace>/": every key of the namespace starts with it.
  const std::string& prefix() const { return prefix_; }
  std::string Key(absl::string_view name) const;
  // The lock name of one of the namespace's keys; nullopt for another key.
  std::optional<absl::string_view> NameOf(absl::string_view key) const;

 private:
  std::string prefix_;
};

// The name under which an object of `kind` lives in the namespace: a lock's
// own name, or "\x1f", the kind's letter (KindLetter) and the name for the
// other kinds (an election's leadership is one key, as a lock's writer).
// No valid name holds a control byte (C15): the kinds never meet.
std::string ObjectName(ObjectKind kind, absl::string_view name);
// The kind and plain name of a name ObjectName() made; nullopt for a name
// of a kind this backend does not keep as one key.
struct NamedObject {
  ObjectKind kind;
  absl::string_view name;
  bool readers = false;  // a lock's reader or writer's intent (kLock)
};
std::optional<NamedObject> ParseObjectName(absl::string_view object_name);

// The key name of one hold of an object: the object's name (ObjectName),
// or for a semaphore the key of `owner`'s grant under it, one per owner
// (C5): "\x1fs<name>\x1fh<owner>". A semaphore's head waiter's place is
// "\x1fs<name>\x1fp".
// A lock's reader is a key of its own in the same way, "\x1fr<name>\x1fh
// <owner>", and the waiting writer's intent is "\x1fr<name>\x1fp".
std::string HoldObjectName(const HoldShape& shape, absl::string_view name,
                           absl::string_view owner);
// Every reader's key name of the lock starts with it (not the intent's).
std::string ReadersPrefix(absl::string_view lock);
std::string IntentName(absl::string_view lock);
// Every reader's key name of the lock and its intent's start with it, and
// no other lock's.
std::string ReadersAndIntentPrefix(absl::string_view lock);
// Every reader's and intent's key name of the locks whose names start with
// `name_prefix` starts with it.
std::string ReadLocksPrefix(absl::string_view name_prefix);
std::string PlaceName(absl::string_view semaphore);
// Every key name of the semaphore's grants and place starts with it.
std::string SemaphorePrefix(absl::string_view semaphore);

// A call about one hold of an object as the call on the lock writer of the
// hold's own key (HoldObjectName): the call names `key_name`, which must
// outlive it; the shape stays, so that a leader's re-entry proclaims.
template <typename Call>
Call OnKey(const Call& call, const std::string& key_name) {
  Call on_key = call;
  on_key.name = key_name;
  return on_key;
}

// What a semaphore's grant (or its head waiter's place) adds to its
// HoldValue, in HoldValue::value: "<N> <permits> <slots>".
struct PermitsValue {
  int64_t limit = 0;
  int64_t permits = 0;
  std::vector<int64_t> slots;  // empty for a place
};
std::string EncodePermits(const PermitsValue& permits);
std::optional<PermitsValue> DecodePermits(absl::string_view text);

// Every client's liveness key starts with it, whatever its namespace.
inline constexpr absl::string_view kLivenessPrefix = "/dlock/%live/";
std::string LivenessKey(absl::string_view liveness_id);

// A lock key's value. A hold: its owner, its count (C5), the largest lease
// asked for it (C5), when it began, and the liveness ids of the clients it
// is held through. A lock kept after its release (ReleaseCall::keep_for): no
// owner, no holds, lease_ms the keep, no liveness.
struct HoldValue {
  int64_t holds = 0;
  int64_t lease_ms = 0;
  int64_t since_ms = 0;  // the writer's wall clock, for LockInfo::since
  // Unique to the write that put this value, so that a write retried after
  // a lost reply recognizes its own first attempt (etcd_client.h).
  std::string write_id;
  // A waiter may take the hold over once every one of these clients'
  // liveness keys is gone. Empty: its lease alone ends it (a client with
  // liveness off took or re-entered it, or it is kept).
  std::vector<std::string> live;
  // An election's leader's value (C24); empty for a lock. Any byte: stored
  // with its length before the owner.
  std::string value;
  std::string owner;  // opaque, last: it may hold any byte

  bool kept() const { return owner.empty(); }
};

// A grant through a client whose liveness id is `id` (nullopt: liveness
// off). A fresh hold is protected by that client alone; a re-entry adds it
// to those who protect the hold, and one without liveness leaves the hold
// to its lease for good, since that client believes it until then.
void AddLiveness(HoldValue& value, const std::optional<std::string>& id,
                 bool fresh);

std::string Encode(const HoldValue& value);
// nullopt for a value Encode() cannot have written.
std::optional<HoldValue> Decode(absl::string_view text);

}  // namespace dlock::etcd

#endif  // DLOCK_BACKENDS_ETCD_ETCD_LAYOUT_H_
