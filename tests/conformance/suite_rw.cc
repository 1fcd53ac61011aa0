// Copyright dlock authors. Conformance: read-write locks (C23). Each case
// is named after the clause; a backend whose traits do not offer them is
// checked for answering Unimplemented with its reason.
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dlock/cancel.h"
#include "fault_backend.h"
#include "primitives_fixture.h"

namespace dlock::test {
namespace {

constexpr char kName[] = "catalog";

AcquireOptions Waiting(absl::Duration wait = kNoHang) {
  return WithLease(kLongLease, wait);
}

// A client and its handle of the lock.
struct Side {
  std::unique_ptr<LockClient> client;
  std::unique_ptr<ReadWriteLock> rw;
};

// `count` clients of `new_client` with their handles of the lock; none when
// the backend does not offer read-write locks (Offered checked it said so).
absl::StatusOr<std::vector<Side>> NewSides(
    int count, absl::FunctionRef<absl::StatusOr<std::unique_ptr<LockClient>>()>
                   new_client) {
  std::vector<Side> sides;
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<std::unique_ptr<LockClient>> c = new_client();
    if (!c.ok()) return c.status();
    if (i == 0 && !Offered(**c, Primitive::kReadWriteLock)) return sides;
    absl::StatusOr<std::unique_ptr<ReadWriteLock>> rw =
        (*c)->GetReadWriteLock(kName);
    if (!rw.ok()) return rw.status();
    sides.push_back(Side{*std::move(c), *std::move(rw)});
  }
  return sides;
}

TEST_P(Conformance, C23_ReadersShare) {
  ASSERT_OK_AND_ASSIGN(std::vector<Side> sides,
                       NewSides(3, [&] { return NewClient(); }));
  if (sides.empty()) return;
  std::vector<Hold> reads;
  for (Side& side : sides) {
    ASSERT_OK_AND_ASSIGN(
        Hold read, side.rw->TryAcquireRead(Waiting(absl::ZeroDuration())));
    reads.push_back(std::move(read));
  }
  ASSERT_OK_AND_ASSIGN(ObjectInfo info, sides[0].rw->Inspect());
  ASSERT_EQ(info.holders.size(), 3u);
  for (const HolderInfo& h : info.holders) EXPECT_TRUE(h.shared);
  for (Hold& read : reads) EXPECT_OK(read.Release());
}

TEST_P(Conformance, C23_WriterExcludesEveryOtherHolder) {
  ASSERT_OK_AND_ASSIGN(std::vector<Side> sides,
                       NewSides(4, [&] { return NewClient(); }));
  if (sides.empty()) return;
  std::atomic<int> readers{0}, writers{0}, violations{0}, most_readers{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      ReadWriteLock& rw = *sides[t % sides.size()].rw;
      const bool writer = t % 3 == 0;
      for (int round = 0; round < 8; ++round) {
        absl::StatusOr<Hold> hold =
            writer ? rw.AcquireWrite(Waiting()) : rw.AcquireRead(Waiting());
        ASSERT_OK(hold);
        ASSERT_EQ(hold->state(), LockState::kHeld);
        if (writer) {
          if (writers.fetch_add(1) != 0 || readers.load() != 0) ++violations;
        } else {
          const int in = readers.fetch_add(1) + 1;
          if (writers.load() != 0) ++violations;
          int seen = most_readers.load();
          while (in > seen && !most_readers.compare_exchange_weak(seen, in)) {
          }
        }
        absl::SleepFor(absl::Milliseconds(3));
        (writer ? writers : readers).fetch_sub(1);
        EXPECT_OK(hold->Release());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(violations.load(), 0) << "a writer beside another holder";
  EXPECT_GE(most_readers.load(), 2) << "readers never overlapped";
}

TEST_P(Conformance, C23_PlainLockIsTheWriter) {
  ASSERT_OK_AND_ASSIGN(auto writer, NewClient());
  ASSERT_OK_AND_ASSIGN(auto reader, NewClient());
  if (!Offered(*reader, Primitive::kReadWriteLock)) return;
  ASSERT_OK_AND_ASSIGN(auto lock, writer->GetLock(kName));
  ASSERT_OK_AND_ASSIGN(auto rw, reader->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(Hold written, lock->TryAcquire(WithLease(kLongLease)));
  absl::StatusOr<Hold> refused = rw->TryAcquireRead(WithLease(kLongLease));
  EXPECT_TRUE(IsHeldByAnother(refused.status())) << refused.status();
  EXPECT_OK(written.Release());
  ASSERT_OK_AND_ASSIGN(Hold read, rw->TryAcquireRead(WithLease(kLongLease)));
  absl::StatusOr<Hold> blocked = lock->TryAcquire(WithLease(kLongLease));
  EXPECT_TRUE(IsHeldByAnother(blocked.status())) << blocked.status();
  EXPECT_OK(read.Release());
  ASSERT_OK_AND_ASSIGN(Hold free, lock->TryAcquire(WithLease(kLongLease)));
  EXPECT_OK(free.Release());
}

TEST_P(Conformance, C23_WaitingWriterStopsNewReaders) {
  ASSERT_OK_AND_ASSIGN(auto old_reader, NewClient());
  ASSERT_OK_AND_ASSIGN(auto new_reader, NewClient());
  ASSERT_OK_AND_ASSIGN(auto writer, NewClient());
  if (!Offered(*writer, Primitive::kReadWriteLock)) return;
  ASSERT_OK_AND_ASSIGN(auto old_rw, old_reader->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(auto new_rw, new_reader->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(auto write_lock, writer->GetLock(kName));
  ASSERT_OK_AND_ASSIGN(Hold read, old_rw->AcquireRead(Waiting()));
  BackgroundAcquire waiting(*write_lock, Waiting());
  absl::SleepFor(kLetWaiterBlock);
  ASSERT_FALSE(waiting.done());
  absl::StatusOr<Hold> refused = new_rw->TryAcquireRead(WithLease(kLongLease));
  EXPECT_TRUE(IsHeldByAnother(refused.status()))
      << "a new reader passed a waiting writer: " << refused.status();
  // The reader already in re-enters: refusing would make it wait for itself.
  ASSERT_OK_AND_ASSIGN(Hold again,
                       old_rw->TryAcquireRead(WithLease(kLongLease)));
  EXPECT_OK(again.Release());
  const absl::Time released = absl::Now();
  EXPECT_OK(read.Release());
  ASSERT_TRUE(waiting.WaitDone(kNoHang));
  EXPECT_OK(waiting.result());
  EXPECT_LE(waiting.done_at() - released, kPromptly);
}

TEST_P(Conformance, C23_WriterGetsInUnderAStreamOfReaders) {
  ASSERT_OK_AND_ASSIGN(auto readers, NewClient());
  ASSERT_OK_AND_ASSIGN(auto writer, NewClient());
  if (!Offered(*writer, Primitive::kReadWriteLock)) return;
  ASSERT_OK_AND_ASSIGN(auto rw, readers->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(auto write_rw, writer->GetReadWriteLock(kName));
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      absl::SleepFor(absl::Milliseconds(10 * t));  // staggered: always one in
      while (!stop.load()) {
        absl::StatusOr<Hold> read = rw->AcquireRead(Waiting());
        if (!read.ok()) continue;
        ++reads;
        absl::SleepFor(absl::Milliseconds(40));
        EXPECT_OK(read->Release());
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(100));
  absl::StatusOr<Hold> written = write_rw->AcquireWrite(Waiting());
  stop = true;
  if (written.ok()) {
    EXPECT_OK(written->Release());  // before the readers' last waits
  }
  for (std::thread& t : threads) t.join();
  EXPECT_OK(written) << "the writer was starved by readers";
  EXPECT_GT(reads.load(), 4);
}

TEST_P(Conformance, C23_ReadToWriteUpgradeIsRefused) {
  auto faults = std::make_shared<FaultPlan>();
  ClientOptions options;
  options.backend_decorator = faults->Decorator();
  ASSERT_OK_AND_ASSIGN(auto client, NewClient(options));
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  if (!Offered(*client, Primitive::kReadWriteLock)) return;
  ASSERT_OK_AND_ASSIGN(auto rw, client->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(Hold read, rw->AcquireRead(Waiting()));
  const int sent = faults->calls(FaultPlan::kAcquire);
  absl::StatusOr<Hold> upgrade = rw->AcquireWrite(Waiting());
  EXPECT_TRUE(IsUpgradeRefused(upgrade.status())) << upgrade.status();
  EXPECT_EQ(faults->calls(FaultPlan::kAcquire), sent)
      << "known here: no round trip";
  EXPECT_OK(read.Release());
  // Through an owner token that reads through another client: the backend
  // refuses, at once.
  ASSERT_OK_AND_ASSIGN(Hold shared, rw->AcquireRead(AsOwner("job-3")));
  ASSERT_OK_AND_ASSIGN(auto elsewhere, other->GetReadWriteLock(kName));
  AcquireOptions write = AsOwner("job-3");
  write.wait = kNoHang;
  const absl::Time asked = absl::Now();
  absl::StatusOr<Hold> refused = elsewhere->AcquireWrite(write);
  EXPECT_TRUE(IsUpgradeRefused(refused.status())) << refused.status();
  EXPECT_LE(absl::Now() - asked, kPromptly) << "refused, not waited";
  EXPECT_OK(shared.Release());
}

TEST_P(Conformance, C23_WriterMayAlsoRead) {
  ASSERT_OK_AND_ASSIGN(auto writer, NewClient());
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  if (!Offered(*writer, Primitive::kReadWriteLock)) return;
  ASSERT_OK_AND_ASSIGN(auto rw, writer->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(auto other_rw, other->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(Hold write, rw->AcquireWrite(Waiting()));
  ASSERT_OK_AND_ASSIGN(Hold read, rw->TryAcquireRead(WithLease(kLongLease)));
  EXPECT_EQ(read.fencing_token(), write.fencing_token());
  // Reading, it still re-enters its write: not an upgrade.
  ASSERT_OK_AND_ASSIGN(Hold again, rw->TryAcquireWrite(WithLease(kLongLease)));
  EXPECT_EQ(again.fencing_token(), write.fencing_token());
  EXPECT_OK(again.Release());
  EXPECT_CODE(other_rw->TryAcquireRead(WithLease(kLongLease)),
              kDeadlineExceeded);
  // Keeping the lock after the write would leave the read in a lock held
  // by nobody: refused, nothing changed.
  if (writer->traits().keeps_after_release) {
    EXPECT_CODE(write.ReleaseAndKeepFor(absl::Seconds(5)), kFailedPrecondition);
    EXPECT_TRUE(write.active());
  }
  EXPECT_CODE(read.ReleaseAndKeepFor(absl::Seconds(5)), kUnimplemented);
  EXPECT_TRUE(read.active());
  EXPECT_OK(read.Release());
  EXPECT_OK(write.Release());
}

TEST_P(Conformance, C23_WriteReleaseKeepsTheWritersRead) {
  ASSERT_OK_AND_ASSIGN(auto writer, NewClient());
  ASSERT_OK_AND_ASSIGN(auto other, NewClient());
  if (!Offered(*writer, Primitive::kReadWriteLock)) return;
  ASSERT_OK_AND_ASSIGN(auto rw, writer->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(auto other_rw, other->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(Hold write, rw->AcquireWrite(Waiting()));
  ASSERT_OK_AND_ASSIGN(Hold read, rw->AcquireRead(Waiting()));
  EXPECT_OK(write.Release());  // a downgrade
  EXPECT_EQ(read.state(), LockState::kHeld);
  ASSERT_OK_AND_ASSIGN(Hold other_read,
                       other_rw->TryAcquireRead(WithLease(kLongLease)));
  EXPECT_OK(other_read.Release());
  // The writer's read keeps writers out.
  EXPECT_TRUE(IsHeldByAnother(
      other_rw->TryAcquireWrite(WithLease(kLongLease)).status()));
  EXPECT_OK(read.Release());
  ASSERT_OK_AND_ASSIGN(Hold next,
                       other_rw->TryAcquireWrite(WithLease(kLongLease)));
  EXPECT_OK(next.Release());
}

TEST_P(Conformance, C23_WriterTokensIncrease) {
  ASSERT_OK_AND_ASSIGN(auto a, NewClient());
  ASSERT_OK_AND_ASSIGN(auto b, NewClient());
  if (!Offered(*a, Primitive::kReadWriteLock)) return;
  ASSERT_OK_AND_ASSIGN(auto rw_a, a->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(auto rw_b, b->GetReadWriteLock(kName));
  uint64_t largest = 0;
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK_AND_ASSIGN(Hold r1, rw_a->AcquireRead(Waiting()));
    ASSERT_OK_AND_ASSIGN(Hold r2, rw_b->AcquireRead(Waiting()));
    largest = std::max({largest, r1.fencing_token(), r2.fencing_token()});
    EXPECT_OK(r1.Release());
    EXPECT_OK(r2.Release());
    ASSERT_OK_AND_ASSIGN(Hold w,
                         (i % 2 ? rw_a : rw_b)->AcquireWrite(Waiting()));
    EXPECT_GT(w.fencing_token(), largest) << "writer " << i;
    largest = w.fencing_token();
    EXPECT_OK(w.Release());
  }
}

TEST_P(Conformance, C23_LapsedReadersFreeTheLock) {
  ASSERT_OK_AND_ASSIGN(auto reader, NewClient());
  ASSERT_OK_AND_ASSIGN(auto writer, NewClient());
  if (!Offered(*writer, Primitive::kReadWriteLock)) return;
  constexpr absl::Duration kLease = absl::Milliseconds(500);
  ASSERT_OK_AND_ASSIGN(auto rw, reader->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(auto write_rw, writer->GetReadWriteLock(kName));
  // As C2 measures a lock's lease: the server counts the lease from its own
  // grant, which comes after the request was sent and before the reply is
  // in, so the earliest a writer may enter is counted from the send.
  const absl::Time before_grant = absl::Now();
  ASSERT_OK_AND_ASSIGN(Hold read, rw->AcquireRead(WithLease(kLease)));
  const absl::Time after_grant = absl::Now();
  absl::Mutex mu;
  absl::Time told = absl::InfiniteFuture();
  ScopedCancelCallback on_lost(read.lost_token(), [&] {
    absl::MutexLock lock(&mu);
    told = absl::Now();
  });
  // Never released: only its lease ends it.
  ASSERT_OK_AND_ASSIGN(Hold write, write_rw->AcquireWrite(Waiting()));
  const absl::Time granted = absl::Now();
  EXPECT_GE(granted - before_grant, kLease - absl::Milliseconds(50))
      << "a writer got in before the reader's lease ran out";
  EXPECT_LE(granted - after_grant,
            kLease + ClientOptions().fallback_poll + kPromptly);
  EXPECT_EQ(read.state(), LockState::kLost);
  {
    absl::MutexLock lock(&mu);
    EXPECT_LE(told, granted) << "the reader was told after the writer got in";
  }
  EXPECT_OK(write.Release());
}

TEST_P(Conformance, C23_TimedOutWriterLeavesNoIntent) {
  ASSERT_OK_AND_ASSIGN(auto reader, NewClient());
  ASSERT_OK_AND_ASSIGN(auto writer, NewClient());
  ASSERT_OK_AND_ASSIGN(auto later, NewClient());
  if (!Offered(*writer, Primitive::kReadWriteLock)) return;
  ASSERT_OK_AND_ASSIGN(auto rw, reader->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(auto write_rw, writer->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(auto later_rw, later->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(Hold read, rw->AcquireRead(Waiting()));
  absl::StatusOr<Hold> timed_out =
      write_rw->AcquireWrite(Waiting(absl::Milliseconds(300)));
  EXPECT_TRUE(IsWaitExpired(timed_out.status())) << timed_out.status();
  ASSERT_OK_AND_ASSIGN(ObjectInfo info, rw->Inspect());
  EXPECT_FALSE(info.waiter.has_value()) << "the writer's intent stayed";
  ASSERT_OK_AND_ASSIGN(Hold next,
                       later_rw->TryAcquireRead(WithLease(kLongLease)));
  EXPECT_OK(next.Release());
  EXPECT_OK(read.Release());
}

// What `dlock status`, `dlock list` and `dlock unlock --force` read (C11):
// a lock held by readers alone has no writer, so the lock's own view
// (Inspect, List) finds none, and the object's view (the handle's Inspect,
// ListObjects) shows each reader with its mode, its owner and its token.
TEST_P(Conformance, C23_AdminShowsEveryReaderAndNoWriter) {
  ASSERT_OK_AND_ASSIGN(std::vector<Side> sides,
                       NewSides(2, [&] { return NewClient(); }));
  if (sides.empty()) return;
  ASSERT_OK_AND_ASSIGN(auto admin, NewClient());
  std::vector<Hold> reads;
  std::vector<std::pair<std::string, uint64_t>> expected;
  for (Side& side : sides) {
    ASSERT_OK_AND_ASSIGN(Hold read, side.rw->AcquireRead(Waiting()));
    expected.emplace_back(read.owner(), read.fencing_token());
    reads.push_back(std::move(read));
  }
  std::sort(expected.begin(), expected.end());
  auto readers_of = [](const ObjectInfo& info) {
    std::vector<std::pair<std::string, uint64_t>> seen;
    for (const HolderInfo& h : info.holders) {
      EXPECT_TRUE(h.shared) << h.owner << " shown as the writer";
      seen.emplace_back(h.owner, h.fencing_token);
    }
    std::sort(seen.begin(), seen.end());
    return seen;
  };
  ASSERT_OK_AND_ASSIGN(LockInfo lock, admin->Admin().Inspect(kName));
  EXPECT_FALSE(lock.locked) << "a reader shown as the writer: " << lock.owner;
  ASSERT_OK_AND_ASSIGN(ObjectInfo info, sides[0].rw->Inspect());
  EXPECT_EQ(readers_of(info), expected);
  if (admin->traits().can_list) {
    ASSERT_OK_AND_ASSIGN(std::vector<LockInfo> locks, admin->Admin().List());
    for (const LockInfo& l : locks) {
      EXPECT_NE(l.name, kName) << "listed with a writer: " << l.owner;
    }
    ASSERT_OK_AND_ASSIGN(std::vector<ObjectInfo> objects,
                         admin->Admin().ListObjects(ObjectKind::kLock));
    auto listed =
        std::find_if(objects.begin(), objects.end(),
                     [](const ObjectInfo& o) { return o.name == kName; });
    ASSERT_NE(listed, objects.end()) << "a lock held by readers is not listed";
    EXPECT_EQ(readers_of(*listed), expected);
  }
  for (Hold& read : reads) EXPECT_OK(read.Release());
}

// An operator's force unlock (C12), by the lock's name or as an object,
// ends every reader at once: a writer gets in, and each reader is told of
// its loss once (C20).
TEST_P(Conformance, C23_ForceUnlockEndsEveryReader) {
  ClientOptions options;
  options.watchdog_lease = kShortWatchdogLease;
  ASSERT_OK_AND_ASSIGN(std::vector<Side> sides,
                       NewSides(2, [&] { return NewClient(options); }));
  if (sides.empty()) return;
  ASSERT_OK_AND_ASSIGN(auto admin, NewClient());
  ASSERT_OK_AND_ASSIGN(auto writer, NewClient());
  ASSERT_OK_AND_ASSIGN(auto write_lock, writer->GetLock(kName));
  for (const bool as_object : {false, true}) {
    SCOPED_TRACE(as_object ? "ForceUnlockObject" : "ForceUnlock");
    std::vector<LostRecorder> lost(sides.size());
    std::vector<Hold> reads;
    for (size_t i = 0; i < sides.size(); ++i) {
      AcquireOptions watched;
      watched.on_lost = lost[i].Callback();
      ASSERT_OK_AND_ASSIGN(Hold read, sides[i].rw->AcquireRead(watched));
      reads.push_back(std::move(read));
    }
    ASSERT_OK(as_object
                  ? admin->Admin().ForceUnlockObject(ObjectKind::kLock, kName)
                  : admin->Admin().ForceUnlock(kName));
    ASSERT_OK_AND_ASSIGN(ObjectInfo info, sides[0].rw->Inspect());
    EXPECT_TRUE(info.holders.empty()) << info.holders.size() << " left";
    absl::StatusOr<Hold> written =
        write_lock->TryAcquire(WithLease(kLongLease));
    EXPECT_OK(written) << "a reader was left holding";
    for (size_t i = 0; i < sides.size(); ++i) {
      ASSERT_TRUE(lost[i].WaitForEvents(1, kNoHang)) << "reader " << i;
      EXPECT_EQ(SettledEvents(lost[i]), 1u) << "reader " << i;
      EXPECT_TRUE(lost[i].Events()[0].shared);
      EXPECT_TRUE(IsLost(lost[i].Events()[0].reason));
      EXPECT_EQ(reads[i].state(), LockState::kLost);
    }
    if (written.ok()) EXPECT_OK(written->Release());
  }
}

// A writer that also reads (C23_WriterMayAlsoRead) loses both holds to a
// force unlock by the lock's name, each told once: nothing is left that
// keeps another writer out.
TEST_P(Conformance, C23_ForceUnlockEndsTheWriterAndItsRead) {
  ClientOptions options;
  options.watchdog_lease = kShortWatchdogLease;
  LostRecorder lost;
  options.on_lost = lost.Callback();
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(options));
  ASSERT_OK_AND_ASSIGN(auto admin, NewClient());
  ASSERT_OK_AND_ASSIGN(auto next, NewClient());
  if (!Offered(*holder, Primitive::kReadWriteLock)) return;
  ASSERT_OK_AND_ASSIGN(auto rw, holder->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(auto next_rw, next->GetReadWriteLock(kName));
  ASSERT_OK_AND_ASSIGN(Hold write, rw->AcquireWrite());
  ASSERT_OK_AND_ASSIGN(Hold read, rw->AcquireRead());
  ASSERT_OK(admin->Admin().ForceUnlock(kName));
  ASSERT_OK_AND_ASSIGN(ObjectInfo info, next_rw->Inspect());
  EXPECT_TRUE(info.holders.empty()) << info.holders.size() << " left";
  absl::StatusOr<Hold> written =
      next_rw->TryAcquireWrite(WithLease(kLongLease));
  EXPECT_OK(written) << "the writer's read was left holding";
  ASSERT_TRUE(lost.WaitForEvents(2, kNoHang)) << lost.Events().size();
  EXPECT_EQ(SettledEvents(lost), 2u);
  EXPECT_EQ(write.state(), LockState::kLost);
  EXPECT_EQ(read.state(), LockState::kLost);
  if (written.ok()) EXPECT_OK(written->Release());
}

}  // namespace
}  // namespace dlock::test
