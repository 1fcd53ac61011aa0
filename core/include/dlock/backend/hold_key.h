// Copyright dlock authors. The (lock name, owner) pair that keys a hold,
// and a hash map of holds that is looked up by string views, so that a
// lookup on a hot path (State(), Backend::HeldUntil()) allocates nothing.
// For the core and for backends that keep a table of their own holds.
#ifndef DLOCK_BACKEND_HOLD_KEY_H_
#define DLOCK_BACKEND_HOLD_KEY_H_

#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace dlock {

using HoldKey = std::pair<std::string, std::string>;  // name, owner
using HoldKeyView = std::pair<absl::string_view, absl::string_view>;

struct HoldKeyHash {
  using is_transparent = void;
  size_t operator()(const HoldKeyView& k) const {
    return absl::HashOf(k.first, k.second);
  }
  size_t operator()(const HoldKey& k) const {
    return (*this)(HoldKeyView(k.first, k.second));
  }
};

struct HoldKeyEq {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return absl::string_view(a.first) == absl::string_view(b.first) &&
           absl::string_view(a.second) == absl::string_view(b.second);
  }
};

// holds.find(HoldKeyView(name, owner)) needs no HoldKey.
template <typename V>
using HoldMap = absl::flat_hash_map<HoldKey, V, HoldKeyHash, HoldKeyEq>;

}  // namespace dlock

#endif  // DLOCK_BACKEND_HOLD_KEY_H_
