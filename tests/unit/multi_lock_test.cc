// Copyright dlock authors. The client core's two forms of a multi-lock
// (C25) over memory://: one Backend::AcquireAll call where the backend's
// traits say it is atomic, else the names one by one in byte order. The
// conformance suite checks what both promise on every backend; this checks
// which form runs.
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dlock/backend/forwarding_backend.h"
#include "dlock/client.h"
#include "dlock/errors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Names = std::vector<std::string>;

// What the core sent: the names of each single Acquire, and how many
// AcquireAll calls.
struct Sent {
  absl::Mutex mu;
  std::vector<std::string> acquired ABSL_GUARDED_BY(mu);
  int all_calls ABSL_GUARDED_BY(mu) = 0;
};

// Declares `mode` and counts what reaches the backend.
class CountingBackend : public ForwardingBackend {
 public:
  CountingBackend(std::unique_ptr<Backend> target, MultiLockMode mode,
                  std::shared_ptr<Sent> sent)
      : ForwardingBackend(std::move(target)), mode_(mode), sent_(sent) {}
  BackendTraits Traits() const override {
    BackendTraits traits = target().Traits();
    traits.multi_lock = mode_;
    return traits;
  }
  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override {
    {
      absl::MutexLock lock(&sent_->mu);
      sent_->acquired.emplace_back(call.name);
    }
    return target().Acquire(call);
  }
  absl::StatusOr<std::vector<Grant>> AcquireAll(
      absl::Span<const AcquireCall> parts, MonoTime deadline,
      const CancelToken& cancel) override {
    {
      absl::MutexLock lock(&sent_->mu);
      ++sent_->all_calls;
    }
    return target().AcquireAll(parts, deadline, cancel);
  }

 private:
  const MultiLockMode mode_;
  const std::shared_ptr<Sent> sent_;
};

class MultiLockTest : public ::testing::Test {
 protected:
  std::unique_ptr<LockClient> Client(MultiLockMode mode) {
    ClientOptions options;
    options.backend_decorator = [mode, sent = sent_](
                                    std::unique_ptr<Backend> backend) {
      return std::make_unique<CountingBackend>(std::move(backend), mode, sent);
    };
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri_, options);
    EXPECT_OK(client);
    return *std::move(client);
  }

  const std::string uri_ = absl::StrCat("memory://multi-lock-test-", getpid());
  std::shared_ptr<Sent> sent_ = std::make_shared<Sent>();
};

TEST_F(MultiLockTest, AnAtomicBackendGetsEveryNameInOneCall) {
  std::unique_ptr<LockClient> client = Client(MultiLockMode::kAtomic);
  absl::StatusOr<MultiHold> all = client->AcquireAll(Names{"b", "a", "c"});
  ASSERT_OK(all);
  EXPECT_THAT(all->names(), ElementsAre("b", "a", "c"));
  {
    absl::MutexLock lock(&sent_->mu);
    EXPECT_EQ(sent_->all_calls, 1);
    EXPECT_TRUE(sent_->acquired.empty());
  }
  EXPECT_OK(all->Release());
}

TEST_F(MultiLockTest, OtherwiseTheNamesGoOneByOneInByteOrder) {
  std::unique_ptr<LockClient> client = Client(MultiLockMode::kOrdered);
  absl::StatusOr<MultiHold> all =
      client->AcquireAll(Names{"b", "\xc3\xa9", "a", "B"});
  ASSERT_OK(all);
  EXPECT_THAT(all->names(), ElementsAre("b", "\xc3\xa9", "a", "B"));
  {
    absl::MutexLock lock(&sent_->mu);
    EXPECT_EQ(sent_->all_calls, 0);
    EXPECT_THAT(sent_->acquired, ElementsAre("B", "a", "b", "\xc3\xa9"));
  }
  EXPECT_OK(all->Release());
}

TEST_F(MultiLockTest, AnAtomicRefusalLeavesNothingAndNamesTheHeldLock) {
  std::unique_ptr<LockClient> client = Client(MultiLockMode::kAtomic);
  absl::StatusOr<std::unique_ptr<LockClient>> other = Connect(uri_);
  ASSERT_OK(other);
  absl::StatusOr<Hold> c = (*other)->TryAcquire("c");
  ASSERT_OK(c);
  absl::StatusOr<MultiHold> all =
      client->AcquireAll(Names{"a", "b", "c"}, {.wait = absl::ZeroDuration()});
  EXPECT_TRUE(IsHeldByAnother(all.status())) << all.status();
  EXPECT_THAT(std::string(all.status().message()), HasSubstr("lock 'c'"));
  for (const char* name : {"a", "b"}) {
    absl::StatusOr<Hold> free = (*other)->TryAcquire(name);
    EXPECT_OK(free) << name;
  }
  absl::StatusOr<MultiHold> waited =
      client->AcquireAll(Names{"a", "c"}, {.wait = absl::Milliseconds(50)});
  EXPECT_TRUE(IsWaitExpired(waited.status())) << waited.status();
}

}  // namespace
}  // namespace dlock
