// Copyright dlock authors. How the etcd:// backend lays locks out in etcd:
//   /dlock/<namespace>/<lock name>
// one key per held lock, on a lease of its own (etcd_backend.h), whose value
// is a HoldValue. In the namespace '%' and '/' are escaped (%25, %2F), so the
// first '/' after it ends it and two namespaces never share a key (C16).
#ifndef DLOCK_BACKENDS_ETCD_ETCD_LAYOUT_H_
#define DLOCK_BACKENDS_ETCD_ETCD_LAYOUT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

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

// A lock key's value. A hold: its owner, its count (C5), the largest lease
// asked for it (C5) and when it began. A lock kept after its release
// (ReleaseCall::keep_for): no owner, no holds, lease_ms the keep.
struct HoldValue {
  int64_t holds = 0;
  int64_t lease_ms = 0;
  int64_t since_ms = 0;  // the writer's wall clock, for LockInfo::since
  // Unique to the write that put this value, so that a write retried after
  // a lost reply recognizes its own first attempt (etcd_client.h).
  std::string write_id;
  std::string owner;  // opaque, last: it may hold any byte

  bool kept() const { return owner.empty(); }
};

std::string Encode(const HoldValue& value);
// nullopt for a value Encode() cannot have written.
std::optional<HoldValue> Decode(absl::string_view text);

}  // namespace dlock::etcd

#endif  // DLOCK_BACKENDS_ETCD_ETCD_LAYOUT_H_
