// The key layout's two checks: the hash slot of a key (Redis Cluster's
// rule, so that tests can show every lock's keys share one), and the
// rolling upgrade from the 0.2 layout (docs/migration.md).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "redis_lock_ops.h"

namespace dlock::redis {
namespace {

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), as Redis Cluster
// hashes keys.
uint16_t Crc16(absl::string_view data) {
  uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc ^= static_cast<uint16_t>(byte) << 8;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc;
}

// The markers this layout leaves in the 0.2 counter's place.
constexpr char kMarkPending[] = "dlock-v3 layout; 0.2 locks may remain";
constexpr char kMarkDone[] = "dlock-v3 layout; no 0.2 locks remain";

// Whether any 0.2 lock key exists (SCAN, which returns every key present
// for the whole scan; the mark stops new ones first).
absl::StatusOr<bool> OldLocksRemain(Connection& conn, const Keyspace& keys,
                                    absl::string_view endpoint,
                                    std::string& example) {
  std::string cursor = "0";
  do {
    absl::StatusOr<Reply> reply = conn.Command(
        {"SCAN", cursor, "MATCH", absl::StrCat(keys.old_lock_prefix(), "*"),
         "COUNT", "1000"});
    if (!reply.ok()) return reply.status();
    const redisReply* r = reply->get();
    if (absl::Status s = ReplyError(r, "SCAN", endpoint); !s.ok()) return s;
    // Every element checked: a broken server's reply is an error, never a
    // read through a missing element (tests/fuzz/redis_reply_fuzz.cc).
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_ARRAY) {
      return Malformed("SCAN", endpoint);
    }
    if (r->element[1]->elements > 0) {
      const redisReply* key = r->element[1]->element[0];
      if (key->type != REDIS_REPLY_STRING) return Malformed("SCAN", endpoint);
      example.assign(key->str, key->len);
      return true;
    }
    cursor.assign(r->element[0]->str, r->element[0]->len);
  } while (cursor != "0");
  return false;
}

// The key's former value; nullopt on a read-only replica (an address that
// names a demoted master), which grants nothing: the first write there
// answers READONLY, the connection is dialed again, and so is this check.
absl::StatusOr<std::optional<std::string>> RunGuard(Connection& conn,
                                                    const Scripts& scripts,
                                                    const Keyspace& keys,
                                                    absl::string_view endpoint,
                                                    bool finish) {
  absl::StatusOr<Reply> reply =
      conn.Command({"EVAL", scripts.layout_guard.body, "1", keys.old_fence(),
                    kMarkPending, kMarkDone, finish ? "1" : "0"});
  if (!reply.ok()) return reply.status();
  if ((*reply)->type == REDIS_REPLY_ERROR &&
      absl::StartsWith(absl::string_view((*reply)->str, (*reply)->len),
                       "READONLY")) {
    return std::nullopt;
  }
  if (absl::Status s = ReplyError(reply->get(), "layout_guard", endpoint);
      !s.ok()) {
    return s;
  }
  if ((*reply)->type != REDIS_REPLY_STRING) {
    return Malformed("layout_guard", endpoint);
  }
  return std::string((*reply)->str, (*reply)->len);
}

}  // namespace

int KeySlot(absl::string_view key) {
  const size_t open = key.find('{');
  if (open != absl::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    // An empty tag ("{}") hashes the whole key, as Redis does.
    if (close != absl::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) & (kClusterSlots - 1);
}

const std::string& SlotTag(int slot) {
  // Decimal numbers in turn, until every slot has one (109,758
  // CRC16s of at most 6 bytes, once per process).
  static const std::vector<std::string>* const tags = [] {
    auto* out = new std::vector<std::string>(kClusterSlots);
    int missing = kClusterSlots;
    for (int n = 0; missing > 0; ++n) {
      std::string tag = absl::StrCat(n);
      std::string& slot_tag = (*out)[Crc16(tag) & (kClusterSlots - 1)];
      if (slot_tag.empty()) {
        slot_tag = std::move(tag);
        --missing;
      }
    }
    return out;
  }();
  return (*tags)[slot];
}

absl::Status CheckLayout(Connection& conn, const Scripts& scripts,
                         const Keyspace& keys, absl::string_view endpoint) {
  absl::StatusOr<std::optional<std::string>> former =
      RunGuard(conn, scripts, keys, endpoint, /*finish=*/false);
  if (!former.ok()) return former.status();
  if (!former->has_value() || **former == kMarkDone) return absl::OkStatus();
  // A counter (0.2 granted locks here), our pending mark (a client before
  // us found 0.2 locks) or nothing (a namespace new to this server): the
  // mark is in place now, so look once for 0.2 locks still held.
  std::string example;
  absl::StatusOr<bool> remain = OldLocksRemain(conn, keys, endpoint, example);
  if (!remain.ok()) return remain.status();
  if (*remain) {
    return absl::FailedPreconditionError(absl::StrCat(
        "redis at ", endpoint,
        " still holds locks of dlock 0.2 in this "
        "namespace (for instance ",
        example,
        "); this version keeps its "
        "locks in another layout and would not see them. Stop the 0.2 "
        "clients and let their locks end (or remove them), then connect "
        "again: docs/migration.md"));
  }
  return RunGuard(conn, scripts, keys, endpoint, /*finish=*/true).status();
}

}  // namespace dlock::redis
