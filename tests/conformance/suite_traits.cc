// Copyright dlock authors. Each backend's declared traits (dlock/traits.h)
// against docs/backends.md and against what the backend does, and its
// documented deviations against the traits that explain them.
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "conformance_fixture.h"
#include "primitives_fixture.h"

namespace dlock::test {
namespace {

// The row of docs/backends.md's table under `section` ("## Declared
// traits") for `label`, column name to cell; empty when there is none.
std::map<std::string, std::string> DocumentedTraits(
    const std::string& label,
    absl::string_view section = "## Declared traits") {
  std::ifstream in(std::string(DLOCK_SOURCE_DIR) + "/docs/backends.md");
  std::string line;
  std::vector<std::string> header;
  bool in_section = false;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "## ")) in_section = line == section;
    if (!in_section || !absl::StartsWith(line, "|")) continue;
    std::vector<std::string> cells;
    for (absl::string_view cell : absl::StrSplit(line, '|')) {
      cells.emplace_back(absl::StripAsciiWhitespace(cell));
    }
    // "| a | b |" splits into "", "a", "b", "".
    cells = std::vector<std::string>(cells.begin() + 1, cells.end() - 1);
    if (header.empty()) {
      header = cells;
      continue;
    }
    if (cells.empty() || cells[0] != label) continue;
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < cells.size(); ++i) {
      row[header[i]] = cells[i];
    }
    return row;
  }
  return {};
}

std::string YesNo(bool b) { return b ? "yes" : "no"; }

TEST_P(Conformance, Traits_AgreeWithTheDocsTable) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  const BackendTraits& t = client->traits();
  std::map<std::string, std::string> row = DocumentedTraits(backend().label);
  ASSERT_FALSE(row.empty())
      << "docs/backends.md has no row for '" << backend().label
      << "' in its \"Declared traits\" table";
  EXPECT_EQ(row["fifo_waiting"], YesNo(t.fifo_waiting));
  EXPECT_EQ(row["holds_tied_to_session"], YesNo(t.holds_tied_to_session));
  EXPECT_EQ(row["holds_survive_restart"], YesNo(t.holds_survive_restart));
  EXPECT_EQ(row["fencing"], FencingStrengthName(t.fencing));
  EXPECT_EQ(row["can_list"], YesNo(t.can_list));
  EXPECT_EQ(row["shared_across_processes"], YesNo(t.shared_across_processes));
  EXPECT_EQ(row["liveness_record"], YesNo(t.liveness_record));
  EXPECT_EQ(row["keeps_after_release"], YesNo(t.keeps_after_release));
  EXPECT_EQ(t.shared_across_processes, backend().shared_across_processes);
}

TEST_P(Conformance, Traits_PrimitivesAgreeWithTheDocsTable) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  const BackendTraits& t = client->traits();
  std::map<std::string, std::string> row =
      DocumentedTraits(backend().label, "## Declared primitives");
  ASSERT_FALSE(row.empty())
      << "docs/backends.md has no row for '" << backend().label
      << "' in its \"Declared primitives\" table";
  EXPECT_EQ(row["semaphores"], YesNo(t.semaphores));
  EXPECT_EQ(row["read_write_locks"], YesNo(t.read_write_locks));
  EXPECT_EQ(row["elections"], YesNo(t.elections));
  EXPECT_EQ(row["semaphore_order"], WaiterOrderName(t.semaphore_order));
  EXPECT_EQ(row["multi_lock"], MultiLockModeName(t.multi_lock));
}

// A backend whose traits do not offer a primitive answers it Unimplemented
// with primitives_note; one that offers it hands it out (C22 to C24).
TEST_P(Conformance, Traits_UnofferedPrimitivesAnswerUnimplemented) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  const BackendTraits& t = client->traits();
  for (Primitive p : {Primitive::kSemaphore, Primitive::kReadWriteLock,
                      Primitive::kElection}) {
    EXPECT_EQ(Offered(*client, p), Declares(t, p));
  }
  if (!t.semaphores) {
    EXPECT_CODE(client->Admin().ListObjects(ObjectKind::kSemaphore),
                kUnimplemented);
  }
  if (!t.elections) {
    EXPECT_CODE(client->Admin().ForceUnlockObject(ObjectKind::kElection, "e"),
                kUnimplemented);
  }
  if (t.semaphores && t.read_write_locks && t.elections) {
    EXPECT_EQ(t.primitives_note, "") << "nothing to explain";
  }
}

// A deviation is allowed only where a declared trait (or the harness's
// lack of a server) explains it.
TEST_P(Conformance, Traits_ExplainEveryDeviation) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  const BackendTraits& t = client->traits();
  for (const std::string& deviation : backend().conformance_deviations) {
    if (absl::StartsWith(deviation, "C2_KilledHolderProcess") ||
        deviation == "C22_PermitsOfAKilledHolderComeBackWithinTheLease" ||
        deviation == "Keep_OutlivesTheReleasingProcess") {
      EXPECT_FALSE(t.shared_across_processes)
          << deviation << " is a deviation only for a backend whose locks "
          << "other processes cannot see";
    } else if (absl::StartsWith(deviation, "Keep_")) {
      EXPECT_FALSE(t.keeps_after_release)
          << deviation << " is a deviation only for a backend that declares "
          << "it cannot keep a lock after its release";
    } else if (absl::StartsWith(deviation, "C18_")) {
      EXPECT_FALSE(backend().restart)
          << deviation << " is a deviation only where there is no server";
    } else {
      ADD_FAILURE() << "no trait explains the deviation " << deviation;
    }
  }
}

TEST_P(Conformance, Traits_ListingAsDeclared) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("listed"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire());
  absl::StatusOr<std::vector<LockInfo>> listed = client->Admin().List();
  if (client->traits().can_list) {
    ASSERT_OK(listed);
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ((*listed)[0].name, "listed");
  } else {
    EXPECT_CODE(listed, kUnimplemented);
  }
  EXPECT_OK(hold.Release());
}

// Where keeping a lock after its release is declared, it is kept; where it
// is not, the core answers Unimplemented and changes nothing.
TEST_P(Conformance, Traits_KeepAfterReleaseAsDeclared) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("kept or not"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire(WithLease(kLongLease)));
  const absl::Status kept = hold.ReleaseAndKeepFor(absl::Seconds(30));
  ASSERT_OK_AND_ASSIGN(LockInfo info, client->Admin().Inspect("kept or not"));
  if (client->traits().keeps_after_release) {
    EXPECT_OK(kept);
    EXPECT_TRUE(info.kept_after_release);
    EXPECT_FALSE(hold.active());
    EXPECT_OK(client->Admin().ForceUnlock("kept or not"));
  } else {
    EXPECT_CODE(kept, kUnimplemented);
    EXPECT_TRUE(hold.active()) << "a refused keep must leave the Hold";
    EXPECT_TRUE(info.locked);
    EXPECT_FALSE(info.kept_after_release);
    EXPECT_OK(hold.Release());
  }
}

// Where FIFO is declared, waiters that began to wait one after another get
// the lock in that order.
TEST_P(Conformance, Traits_DeclaredFifoWaitingServesInOrder) {
  ASSERT_OK_AND_ASSIGN(auto holder_client, NewClient());
  if (!holder_client->traits().fifo_waiting) {
    // Nothing to check beyond the docs table: a race for the lock may be
    // won in any order.
    return;
  }
  ASSERT_OK_AND_ASSIGN(auto held, holder_client->GetLock("queue"));
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire());
  constexpr int kWaiters = 3;
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<std::unique_ptr<LockClient>> clients;
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    ASSERT_OK_AND_ASSIGN(auto c, NewClient());
    clients.push_back(std::move(c));
  }
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
          clients[i]->GetLock("queue");
      ASSERT_OK(lock);
      absl::StatusOr<Hold> got =
          (*lock)->Acquire({.wait = kNoHang, .lease = kLongLease});
      ASSERT_OK(got);
      {
        absl::MutexLock l(&mu);
        order.push_back(i);
      }
      EXPECT_OK(got->Release());
    });
    // Queued before the next one begins.
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_OK(hold.Release());
  for (std::thread& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

// Where holds are declared to survive a restart, the hold is there after
// one; where they are tied to a session and do not survive, a restart
// (which ends every session) is told as a loss.
TEST_P(Conformance, Traits_RestartAsDeclared) {
  if (!backend().restart) {
    // memory://: no server to restart (its C18 deviation says so).
    ASSERT_TRUE(backend().conformance_deviations.count(
        "C18_ServerRestartReportsLostAndClientReconnects"))
        << MissingCapability("restart");
    return;
  }
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  const BackendTraits& t = client->traits();
  ASSERT_OK_AND_ASSIGN(auto lock, client->GetLock("restarted"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire(WithLease(kLongLease)));
  const uint64_t token = hold.fencing_token();
  ASSERT_OK(backend().restart());
  ASSERT_OK_AND_ASSIGN(auto observer, NewClient());
  absl::StatusOr<LockInfo> info = absl::UnknownError("not asked yet");
  ASSERT_TRUE(Eventually(
      [&] {
        info = observer->Admin().Inspect("restarted");
        return info.ok();
      },
      kNoHang))
      << info.status();
  if (t.holds_survive_restart) {
    EXPECT_TRUE(info->locked) << "declared to survive a restart";
    EXPECT_EQ(info->fencing_token, token);
  } else if (t.holds_tied_to_session) {
    EXPECT_TRUE(Eventually([&] { return hold.lost(); }, kNoHang))
        << "a restart ends every session, and the holds on them";
    EXPECT_TRUE(IsLost(hold.lost_reason())) << hold.lost_reason();
  }
}

}  // namespace
}  // namespace dlock::test
