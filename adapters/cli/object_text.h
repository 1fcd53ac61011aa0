// Copyright dlock authors. The objects beyond the mutex (a lock's readers,
// a semaphore's permits, an election's leader) in the CLI's words: the
// HOLDERS summary of `list`, the lines of `status`, the JSON of both.
#ifndef DLOCK_ADAPTERS_CLI_OBJECT_TEXT_H_
#define DLOCK_ADAPTERS_CLI_OBJECT_TEXT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dlock/client.h"
#include "dlock/lock.h"
#include "dlock/object_info.h"
#include "nlohmann/json_fwd.hpp"

namespace dlock::cli {

// The KIND column: "lock" (a writer), "read" (readers), "sem", "elect".
std::string KindColumn(const ObjectInfo& info);

// The kind a --kind flag names: lock (or read, rw), semaphore (sem),
// election (elect). InvalidArgument naming the flag otherwise.
absl::StatusOr<ObjectKind> ParseKind(absl::string_view text);

// The HOLDERS column: "writer", "3 readers, writer waiting", "3/4
// permits", "term 12", "free".
std::string HoldersSummary(const ObjectInfo& info);

// One holder for people: "t:dlock-run:host:41:9f (fencing token 7)".
std::string HolderLine(const HolderInfo& holder);

// `status` of one object: a heading and a line per holder.
std::string ObjectStatusText(const ObjectInfo& info);

// Objects of every kind but those a lock's writer holds or keeps (`kind`
// unset: what `list` adds to its lock table), or every object of `kind`,
// where the backend lists them. Kinds the backend does not list are left
// out when `kind` is unset; asked by `kind`, Unimplemented.
absl::StatusOr<std::vector<ObjectInfo>> ListObjectsBeyondWriters(
    LockClient& client, absl::string_view prefix,
    std::optional<ObjectKind> kind);

// An object as a row of `dlock top`'s lock table: LOCK "jobs (sem)",
// HOLDER "2/3 permits: OWNER, OWNER", the newest token, the longest hold,
// the lease closest to its end, whether every holder is live.
LockInfo ObjectAsLockRow(const ObjectInfo& info);

// A holder of an object whose client is not live (HolderInfo::holder_live
// false): what `monitor --unlock-dead` removes, by its token, never the
// whole object.
struct DeadObjectHolder {
  ObjectKind kind;
  std::string name;
  std::string owner;
  uint64_t fencing_token;
};
std::vector<DeadObjectHolder> DeadObjectHolders(
    const std::vector<ObjectInfo>& objects);

// The ObjectInfo fields as `list --json` and `status --json` print them.
nlohmann::ordered_json ObjectJson(const ObjectInfo& info);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_OBJECT_TEXT_H_
