// Copyright dlock authors. The throwaway Redis Cluster's faults for the
// history checker (redis_cluster.h): a failover of, and a slot migration
// away from, the master of the one lock a history contends for.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "redis_cluster.h"

namespace dlock::test {
namespace {

// The slots of the keys on the master on `port` (SCAN, CLUSTER KEYSLOT).
absl::Status AddSlotsOfKeys(RedisCluster& cluster, int port,
                            std::set<int>& slots) {
  std::string cursor = "0";
  do {
    absl::StatusOr<RespReply> scan =
        cluster.Query(port, {"SCAN", cursor, "COUNT", "1000"});
    if (!scan.ok()) return scan.status();
    if (scan->elements.size() != 2) {
      return absl::InternalError(
          absl::StrCat("node ", port, " gave a malformed SCAN reply"));
    }
    cursor = scan->elements[0].text;
    for (const RespReply& key : scan->elements[1].elements) {
      absl::StatusOr<RespReply> slot =
          cluster.Query(port, {"CLUSTER", "KEYSLOT", key.text});
      if (!slot.ok()) return slot.status();
      int s = 0;
      if (!absl::SimpleAtoi(slot->text, &s)) {
        return absl::InternalError(
            absl::StrCat("node ", port, " gave a malformed CLUSTER KEYSLOT"));
      }
      slots.insert(s);
    }
  } while (cursor != "0");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> RedisCluster::SlotWithKeys(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<std::vector<int>> masters = MasterPorts();
    if (!masters.ok()) return masters.status();
    std::set<int> slots;
    for (int port : *masters) {
      if (absl::Status s = AddSlotsOfKeys(*this, port, slots); !s.ok()) {
        return s;
      }
    }
    if (slots.size() == 1) return *slots.begin();
    if (slots.size() > 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("the masters hold keys in slots ",
                       absl::StrJoin(slots, ", "), ": which lock is meant?"));
    }
    if (absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "no master held a key within ", absl::FormatDuration(timeout)));
}

absl::Status RedisCluster::KillMasterWithKeys() {
  absl::StatusOr<int> slot = SlotWithKeys(absl::Seconds(5));
  if (!slot.ok()) return slot.status();
  absl::StatusOr<int> master = MasterOfSlot(*slot);
  if (!master.ok()) return master.status();
  if (absl::Status s = Kill(*master); !s.ok()) return s;
  failover_ = Failover{.slot = *slot, .killed = *master};
  return absl::OkStatus();
}

absl::Status RedisCluster::WaitForPromotion() {
  if (!failover_.has_value()) {
    return absl::FailedPreconditionError("no master was killed");
  }
  absl::StatusOr<int> promoted =
      WaitForFailover(failover_->slot, failover_->killed);
  if (!promoted.ok()) return promoted.status();
  failover_->promoted = *promoted;
  return absl::OkStatus();
}

absl::Status RedisCluster::RejoinAsReplica() {
  if (!failover_.has_value() || failover_->promoted == 0) {
    return absl::FailedPreconditionError("no replica was promoted");
  }
  const Failover f = *failover_;
  failover_.reset();
  return RejoinAsReplicaOf(f.killed, f.promoted);
}

absl::Status RedisCluster::RejoinAsReplicaOf(int killed, int promoted) {
  if (absl::Status s = Restart(killed); !s.ok()) return s;
  if (absl::Status s = WaitUntilSettled(); !s.ok()) return s;
  return WaitForReplicasInSync(promoted);
}

absl::Status RedisCluster::MigrateSlotWithKeys(absl::Duration half_moved) {
  absl::StatusOr<int> slot = SlotWithKeys(absl::Seconds(5));
  if (!slot.ok()) return slot.status();
  absl::StatusOr<int> from = MasterOfSlot(*slot);
  if (!from.ok()) return from.status();
  absl::StatusOr<std::vector<int>> masters = MasterPorts();
  if (!masters.ok()) return masters.status();
  int to = 0;
  for (int port : *masters) {
    if (port != *from) to = port;
  }
  if (to == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("slot ", *slot, " has no other master to move to"));
  }
  if (absl::Status s = BeginSlotMigration(*slot, to); !s.ok()) return s;
  absl::SleepFor(half_moved);
  return FinishSlotMigration(*slot, to);
}

}  // namespace dlock::test
