// Copyright dlock authors. The zk:// backend's queue driver: what the
// children of a lock-name node say to one waiting node, with no call to
// ZooKeeper (Curator's StandardLockInternalsDriver.getsTheLock, plus the
// kept-lock nodes of dlock). The recipe (zk_queue.h) asks it after each
// listing and acts on the answer.
#ifndef DLOCK_BACKENDS_ZOOKEEPER_ZK_DRIVER_H_
#define DLOCK_BACKENDS_ZOOKEEPER_ZK_DRIVER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "zk_layout.h"
#include "zk_session.h"

namespace dlock::zk {

// Where our node stands in the queue.
struct QueueView {
  enum class Position {
    kGone,    // our node is not in the queue (removed, or its session ended)
    kKept,    // first, but the lock is kept after a release: wait it out
    kFirst,   // first: the lock is ours
    kBehind,  // behind another node: watch it
  };
  Position position = Position::kGone;
  // kKept: the kept-lock nodes to wait out (names, not paths).
  std::vector<std::string> kept;
  // kBehind: the first node (the holder), and the node just before ours.
  std::string holder;
  std::string predecessor;
  // kBehind: our predecessor is the holder.
  bool next_in_line = false;
  // kBehind: the read nodes ahead of ours (zk_layout.h), oldest first.
  std::vector<std::string> reads_ahead;
};

// `children` of the lock-name node, as listed, to the node named `own`.
// Kept-lock nodes named in `foreign` (named like ours, not written by
// dlock) keep nothing and are looked past.
QueueView LookAtQueue(std::vector<std::string> children, absl::string_view own,
                      const std::vector<std::string>& foreign);

// The end of a kept-lock node as read, on ZooKeeper's clock (ms); nullopt
// for a node that is not one.
std::optional<int64_t> KeptEnd(const Reply& read);

// The end of a lock node's lease as read, on ZooKeeper's clock (ms);
// INT64_MAX for a node whose data is not a lock node's.
int64_t LeaseEnd(const Reply& read);

}  // namespace dlock::zk

#endif  // DLOCK_BACKENDS_ZOOKEEPER_ZK_DRIVER_H_
