// Copyright dlock authors. The zk:// backend's node writer: every versioned
// write and delete of a lock node, and what a reply lost with the connection
// leaves to check. Two kinds of node are written: our own node while it
// waits in a queue (an OwnNode, touched, read back, given up), and a hold's
// node once granted (a LocalHold, written by re-entries, renewals and
// releases). Writes are versioned (C3): a conflict means another client of
// the same owner token wrote the node (C6), and the write is made again on
// what the node holds now.
#ifndef DLOCK_BACKENDS_ZOOKEEPER_ZK_WRITER_H_
#define DLOCK_BACKENDS_ZOOKEEPER_ZK_WRITER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "dlock/clock.h"
#include "zk_hold.h"
#include "zk_layout.h"
#include "zk_session.h"

namespace dlock::zk {

// Our node in a lock's queue.
struct OwnNode {
  std::string path;
  std::string name;  // the last component
  // What the node holds at stat.version: our create or last write, or what
  // we last read (another client of the same owner token may have re-entered
  // it once it was first, C6).
  NodeData data;
  Stat stat{};
  uint64_t generation = 0;
  MonoTime written;  // when the create or last touch was sent
};

// What an acquisition writes into NodeData::value: an election's value,
// nothing for the other kinds.
inline std::optional<std::string> ValueOf(const AcquireCall& call) {
  if (call.shape.kind != ObjectKind::kElection) return std::nullopt;
  return std::string(call.value);
}

class NodeWriter {
 public:
  // Versioned writes that lost a race are tried again this many times.
  static constexpr int kWriteRetries = 5;

  explicit NodeWriter(Session& session) : session_(session) {}

  // --- What every call of the backend needs ------------------------------

  MonoTime Now() const { return session_.clock().Now(); }
  // One operation timeout from now.
  MonoTime CallDeadline() const { return Now() + session_.call_timeout(); }
  // Waits for the connection to return, at most until `until`.
  bool Reconnected(MonoTime until) { return session_.WaitConnected(until); }
  bool Connected() { return session_.WaitConnected(MonoTime::InfinitePast()); }
  // A reply that says nothing of what the call did.
  static bool IsConnectionError(int rc);
  // What remains of the lease written at `mtime`, estimated on ZooKeeper's
  // clock (C5).
  int64_t RemainingMs(const NodeData& data, int64_t mtime) const;
  bool Expired(const NodeData& data, const Stat& stat) const {
    return RemainingMs(data, stat.mtime) <= 0;
  }
  // One more hold (C5): the kept lease grows to what is asked; the lease
  // becomes the larger of what remains and what is asked. An election's
  // value becomes the one asked.
  NodeData Reentered(const LocalHold& hold, const AcquireCall& call) const;

  // --- Our node in a queue ------------------------------------------------

  // Writes our node again: its lease starts anew (at least `lease_ms`,
  // never less than what remains of it) and the write reads ZooKeeper's
  // clock; `since_ms`, when set, marks the start of a hold. On a version
  // conflict the node is read again and the write made on what it holds
  // now. Returns the C client's rc.
  // `value`, when set, becomes the node's NodeData::value (a semaphore
  // node's admission), on whatever a conflict read.
  int Touch(OwnNode& own, int64_t lease_ms,
            std::optional<int64_t> since_ms = std::nullopt,
            const std::optional<std::string>& value = std::nullopt);
  // Reads our node into `own`: ZNONODE when it is gone, or not ours.
  int ReloadOwn(OwnNode& own, MonoTime deadline);
  // Takes the hold of an acquisition we give up off our node: deletes it,
  // or, when another client of the same owner token re-entered it (C6),
  // takes one hold off and leaves it to that client. ZOK once done or gone;
  // else the failed call's rc.
  int TakeOwnHoldOff(OwnNode& own, MonoTime deadline);

  // --- A hold's node ------------------------------------------------------

  // Writes `next` to the hold's node with a versioned write and updates
  // `hold` and its record (null for a hold taken elsewhere). On a version
  // conflict (another client re-entered with the same owner token) re-reads
  // `hold` and returns Aborted: the caller recomputes and writes again.
  // GONE (NotOwnerError) when the node is gone or has another owner. A
  // write whose reply was lost is checked after a reconnect, so that it is
  // never applied twice.
  absl::Status Write(absl::string_view name, absl::string_view owner,
                     ZkHold* record, LocalHold& hold, const NodeData& next,
                     absl::string_view what);
  // Write() of next(hold), recomputed after each version conflict, at most
  // kWriteRetries times; then Unavailable: the outcome is known (nothing
  // was written) but other clients of the owner token keep writing.
  absl::Status WriteRecomputed(
      absl::string_view name, absl::string_view owner, ZkHold* record,
      LocalHold& hold, absl::FunctionRef<NodeData(const LocalHold&)> next,
      absl::string_view what);
  // Re-reads the hold's node after a version conflict; false when it is
  // gone or changed owner.
  bool Reload(LocalHold& hold, absl::string_view owner);
  // After a delete whose reply was lost, a NONODE: whether it was our delete
  // that removed the node (true), or it may have been a successor's.
  bool OurDeleteRan(const LocalHold& hold);
  // The multi that releases while keeping (ReleaseCall::keep_for): deletes
  // the holder node at `version` and creates the kept-lock node.
  Call ReleaseKeeping(const std::string& holder_path, int32_t version,
                      const std::string& kept_path, uint64_t token,
                      absl::Duration keep_for);
  // Unavailable: other clients of the owner token kept writing.
  absl::Status KeptConflicting(absl::string_view name,
                               absl::string_view what) const;

  Session& session() { return session_; }

 private:
  Session& session_;
};

}  // namespace dlock::zk

#endif  // DLOCK_BACKENDS_ZOOKEEPER_ZK_WRITER_H_
