// Copyright dlock authors. The core keeps a backend's per-hold record
// (backend.h, HoldRecord) and hands it back on every call about that hold,
// so that a backend needs no hold table of its own. And the contract's
// errors carry their kind (dlock/errors.h).
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dlock/backend/forwarding_backend.h"
#include "dlock/client.h"
#include "dlock/errors.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

struct Record : HoldRecord {
  explicit Record(int id) : id(id) {}
  const int id;
};

// Over memory://: gives each fresh hold a record and notes which record
// every later call received.
class RecordingBackend : public ForwardingBackend {
 public:
  struct Seen {
    absl::Mutex mu;
    std::vector<std::string> calls ABSL_GUARDED_BY(mu);
    void Add(absl::string_view what, const HoldRecord* record) {
      const auto* r = dynamic_cast<const Record*>(record);
      absl::MutexLock lock(&mu);
      calls.push_back(absl::StrCat(what, ":", r == nullptr ? -1 : r->id));
    }
    std::vector<std::string> Take() {
      absl::MutexLock lock(&mu);
      return std::exchange(calls, {});
    }
  };

  RecordingBackend(std::unique_ptr<Backend> target, std::shared_ptr<Seen> seen)
      : ForwardingBackend(std::move(target)), seen_(std::move(seen)) {}

  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override {
    absl::StatusOr<Grant> grant = ForwardingBackend::Acquire(call);
    if (!grant.ok()) return grant;
    if (call.held != nullptr) {
      seen_->Add("reenter", call.held);
    } else {
      grant->record = std::make_shared<Record>(++next_id_);
      seen_->Add("fresh", grant->record.get());
    }
    return grant;
  }
  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override {
    seen_->Add("release", call.record);
    return ForwardingBackend::Release(call);
  }
  absl::Status Renew(const RenewCall& call) override {
    seen_->Add("renew", call.record);
    return ForwardingBackend::Renew(call);
  }

 private:
  const std::shared_ptr<Seen> seen_;
  std::atomic<int> next_id_{0};
};

class HoldRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClientOptions options;
    options.backend_decorator = [seen = seen_](std::unique_ptr<Backend> b) {
      return std::make_unique<RecordingBackend>(std::move(b), seen);
    };
    static std::atomic<int> n{0};
    ASSERT_OK_AND_ASSIGN(
        client_, Connect(absl::StrCat("memory://hold-record-", n++), options));
  }

  std::shared_ptr<RecordingBackend::Seen> seen_ =
      std::make_shared<RecordingBackend::Seen>();
  std::unique_ptr<LockClient> client_;
};

TEST_F(HoldRecordTest, EveryCallAboutAHoldGetsItsRecord) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> lock,
                       client_->GetLock("recorded"));
  ASSERT_OK_AND_ASSIGN(Hold outer, lock->Acquire());
  ASSERT_OK_AND_ASSIGN(Hold inner, lock->Acquire());
  EXPECT_OK(inner.Renew());
  EXPECT_OK(inner.Release());
  EXPECT_OK(outer.Release());
  EXPECT_EQ(seen_->Take(),
            (std::vector<std::string>{"fresh:1", "reenter:1", "renew:1",
                                      "release:1", "release:1"}));
  // A fresh hold after the last release gets a record of its own.
  ASSERT_OK_AND_ASSIGN(Hold again, lock->Acquire());
  EXPECT_OK(again.Release());
  EXPECT_EQ(seen_->Take(), (std::vector<std::string>{"fresh:2", "release:2"}));
}

TEST_F(HoldRecordTest, HoldsOfOtherOwnersKeepTheirOwnRecords) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> a,
                       client_->GetLock("a"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> b,
                       client_->GetLock("b"));
  ASSERT_OK_AND_ASSIGN(Hold on_a, a->Acquire());
  ASSERT_OK_AND_ASSIGN(Hold on_b, b->Acquire({.owner_token = "job"}));
  EXPECT_OK(on_a.Release());
  EXPECT_OK(on_b.Release());
  EXPECT_EQ(seen_->Take(),
            (std::vector<std::string>{"fresh:1", "fresh:2", "release:1",
                                      "release:2"}));
}

// Close() releases what the client holds with each hold's record.
TEST_F(HoldRecordTest, CloseReleasesWithTheRecord) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> lock,
                       client_->GetLock("closed"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire());
  EXPECT_OK(client_->Close());
  EXPECT_EQ(seen_->Take(), (std::vector<std::string>{"fresh:1", "release:1"}));
  absl::Status after = hold.Release();
  EXPECT_TRUE(IsClientClosed(after)) << after;
}

// A release by token from a client that never had the hold has no record.
TEST_F(HoldRecordTest, ReleaseByTokenOfAHoldTakenElsewhereHasNone) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> other,
                       Connect(absl::StrCat("memory://hold-record-other")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> theirs,
                       other->GetLock("shared"));
  ASSERT_OK_AND_ASSIGN(Hold held, theirs->Acquire({.owner_token = "job"}));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> ours,
                       client_->GetLock("shared"));
  absl::Status released = client_->OwnerTokens().Release("shared", "job");
  // Another memory:// instance: ours does not hold it.
  EXPECT_TRUE(IsNotOwner(released)) << released;
  EXPECT_EQ(seen_->Take(), (std::vector<std::string>{"release:-1"}));
}

TEST(ErrorKinds, TryAndWaitSayDifferentThings) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> a,
                       Connect("memory://error-kinds"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> b,
                       Connect("memory://error-kinds"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> held,
                       a->GetLock("kinds"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> wanted,
                       b->GetLock("kinds"));
  ASSERT_OK_AND_ASSIGN(Hold hold, held->Acquire());

  absl::StatusOr<Hold> tried = wanted->TryAcquire();
  EXPECT_CODE(tried, kDeadlineExceeded);
  EXPECT_TRUE(IsHeldByAnother(tried.status())) << tried.status();
  EXPECT_FALSE(IsWaitExpired(tried.status()));

  absl::StatusOr<Hold> waited =
      wanted->Acquire({.wait = absl::Milliseconds(30)});
  EXPECT_CODE(waited, kDeadlineExceeded);
  EXPECT_TRUE(IsWaitExpired(waited.status())) << waited.status();
  EXPECT_FALSE(IsHeldByAnother(waited.status()));

  EXPECT_OK(hold.Release());
  absl::Status twice = hold.Release();
  EXPECT_CODE(twice, kFailedPrecondition);
  EXPECT_TRUE(IsNotOwner(twice)) << twice;
}

TEST(ErrorKinds, ContextKeepsCodeAndKind) {
  absl::Status lost = LostError("x", "its lease ran out");
  EXPECT_TRUE(IsLost(lost));
  absl::Status more = WithContext(lost, "while releasing");
  EXPECT_EQ(more.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(IsLost(more));
  EXPECT_EQ(more.message(),
            "lock 'x' was lost: its lease ran out; while releasing");
  // An error of the cause's own code can be marked as a loss.
  absl::Status unreachable =
      WithKind(absl::UnavailableError("no answer"), ErrorKind::kLost);
  EXPECT_EQ(unreachable.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(IsLost(unreachable));
  // Others carry no kind.
  EXPECT_EQ(ErrorKindOf(absl::UnavailableError("down")), std::nullopt);
  EXPECT_EQ(ErrorKindOf(absl::OkStatus()), std::nullopt);
  EXPECT_FALSE(IsLost(absl::FailedPreconditionError("lost")))
      << "a message is not a kind";
}

}  // namespace
}  // namespace dlock
