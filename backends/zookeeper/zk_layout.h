// Copyright dlock authors. How the zk:// backend lays locks out in ZooKeeper:
//   /<chroot>/dlock/<namespace>/<encoded lock name>/<client id>-<n>-lock-<seq>
// The lock-name node is a container (ZooKeeper removes it once empty); each
// acquisition is an EPHEMERAL_SEQUENTIAL child whose data is a NodeData.
#ifndef DLOCK_BACKENDS_ZOOKEEPER_ZK_LAYOUT_H_
#define DLOCK_BACKENDS_ZOOKEEPER_ZK_LAYOUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "dlock/object_info.h"

namespace dlock::zk {

// One path component for any valid lock name (C15), injective and safe:
// letters, digits, '_', '-' and '.' stay (so names stay readable), every
// other byte becomes %XX, and the components "." and ".." (which ZooKeeper
// rejects) are escaped whole. '/' can therefore never reach the path.
std::string EncodeName(absl::string_view name);
// The inverse; nullopt for a component EncodeName cannot have produced.
std::optional<std::string> DecodeName(absl::string_view component);

// The parent of an object's queue, below the namespace node: a lock's
// encoded name, and "%1F" + a kind letter + the encoded name for the other
// kinds ('e' an election), so that they never meet a lock's (no encoded
// name starts with '%1F': control bytes are not valid in names, C15).
std::string ObjectComponent(ObjectKind kind, absl::string_view name);
// The name of an object of `kind` whose parent is `component`; nullopt
// for another kind's parent, or one ObjectComponent cannot have produced.
std::optional<std::string> ObjectNameOf(ObjectKind kind,
                                        absl::string_view component);

// The sequence number ZooKeeper appended to a lock node's name; nullopt for
// a child that is not a lock node.
std::optional<int64_t> SequenceOf(absl::string_view node_name);

// Lock node names sorted by sequence number: the queue, holder first.
std::vector<std::string> SortedQueue(std::vector<std::string> children);

// A reader of a lock (C23) queues in the lock's own queue, named
//   <client id>-<instance>-<n>-read-lock-<seq>
// (a client of the previous layout counts it as a lock node, so its
// writers wait behind readers), its owner stored as "r:<owner>" so that
// such a client never takes a read node for its own hold. A writer's own
// read carries the writer's token as its value.
inline constexpr absl::string_view kReadTag = "read-";
bool IsReadNode(absl::string_view node_name);
std::string ReaderOwner(absl::string_view owner);
// The owner a reader's stored owner names ("" for another kind of owner).
absl::string_view OwnerOfReader(absl::string_view stored);

// A semaphore's queue node carries its permits and N in its name, before
// the "-lock-<seq>" every queue node ends with:
//   <client id>-<instance>-<n>-s<permits>of<limit>-lock-<seq>
// so that one listing tells the permits queued ahead of a node and the N of
// every participant (C22).
struct PermitsAsked {
  int64_t permits = 0;
  int64_t limit = 0;
};
// "s<permits>of<limit>-": what goes before "lock-" in the node's name.
std::string PermitsTag(const PermitsAsked& asked);
// nullopt for a node name without one.
std::optional<PermitsAsked> PermitsOf(absl::string_view node_name);

// A semaphore node's NodeData::value: "w" while it waits, "h <slots>" once
// admitted (its permit slots, ascending, comma-separated).
std::string WaitingValue();
std::string AdmittedValue(const std::vector<int64_t>& slots);
// The slots of an admitted node; nullopt for a waiting (or foreign) one.
std::optional<std::vector<int64_t>> AdmittedSlots(
    const std::optional<std::string>& value);

// A lock node's data. Changed only by versioned writes (C3).
struct NodeData {
  std::string owner;  // "c:<client id>:<thread>" or "t:<token>" (C6)
  int64_t holds = 1;  // re-entries (C5)
  // The lease runs out lease_ms after the node's mtime, on ZooKeeper's
  // clock (C2). A renewal sets it to kept_ms, the largest lease any
  // acquisition of this hold asked for (C5); a re-entry to the larger of
  // what remains and what it asks.
  int64_t lease_ms = 0;
  int64_t kept_ms = 0;
  // When the current hold began on ZooKeeper's clock (ms since the epoch);
  // 0 means the node's ctime (the holder created it free).
  int64_t since_ms = 0;
  // An election's campaigner: its value (Election::Campaign, Proclaim),
  // written after the line above and a newline (owner ids hold none).
  std::optional<std::string> value;
};

std::string Serialize(const NodeData& data);
std::optional<NodeData> Parse(absl::string_view text);

// The fencing token of a hold of a node: a writer's read carries its
// writer's (kReadTag above); every other node's is its czxid (C8).
uint64_t TokenOf(const NodeData& data, uint64_t czxid);

// A lock kept after its release (ReleaseCall::keep_for): a PERSISTENT child
// "kept-<token>" of the lock-name node, beside the queue (it is no lock
// node), created in one multi with the delete of the released holder node.
// It survives the session, names no owner, and keeps the lock taken until
// keep_ms after its mtime on ZooKeeper's clock; acquirers honour it and the
// first one to find it over deletes it. The token is the released hold's.
struct KeptData {
  int64_t keep_ms = 0;
  uint64_t token = 0;
};
std::string KeptNodeName(uint64_t token);
bool IsKeptNode(absl::string_view node_name);
std::string SerializeKept(const KeptData& data);
std::optional<KeptData> ParseKept(absl::string_view text);

}  // namespace dlock::zk

#endif  // DLOCK_BACKENDS_ZOOKEEPER_ZK_LAYOUT_H_
