// Copyright dlock authors. The client core's key for a primitive's hold
// (issue 24): every table of the core (holds, pending releases, the
// renewer's batch, the notifier) is keyed by (name, owner), and a lock's
// writer, a reader of that lock, a semaphore and an election of one name
// are different holds of one owner. So their names are qualified: the lock's
// own name for a lock (and its writer), "\x1f" + a kind letter + the name
// otherwise. No valid name holds a control character (C15), so a qualified
// name never meets a lock's; the backend sees the plain name and the shape.
#ifndef DLOCK_CORE_SRC_QUALIFIED_NAME_H_
#define DLOCK_CORE_SRC_QUALIFIED_NAME_H_

#include <string>

#include "absl/strings/string_view.h"
#include "dlock/backend/backend.h"

namespace dlock::internal {

// The shapes' keys. Permits and limit are not part of a key: one owner
// holds one grant of a semaphore (C5).
std::string QualifiedName(absl::string_view name, const HoldShape& shape);
inline bool IsQualified(absl::string_view key) {
  return !key.empty() && key[0] == '\x1f';
}
// The object's name in `key`.
absl::string_view ObjectNameOf(absl::string_view key);
// The kind and mode of the hold `key` names (permits and limit unset).
HoldShape ShapeOf(absl::string_view key);
// How a message names the object of `key`: "lock 'x'", "read lock 'x'",
// "semaphore 'x'", "election 'x'".
std::string ObjectPhrase(absl::string_view key);

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_QUALIFIED_NAME_H_
