// Copyright dlock authors. A release that keeps the lock
// (Hold::ReleaseAndKeepFor) and is not confirmed is retried with what is
// left of the keep (C21), counted from the first send: never a plain
// release while some of the keep is left, however little.
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "dlock/backend/forwarding_backend.h"
#include "dlock/client.h"
#include "dlock/clock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

// Answers every release Unavailable without sending it until pass(), and
// records the keep each one asked for.
class KeepRecorder : public ForwardingBackend {
 public:
  explicit KeepRecorder(std::unique_ptr<Backend> target)
      : ForwardingBackend(std::move(target)) {}

  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override {
    {
      absl::MutexLock lock(&mu_);
      keeps_.push_back(call.keep_for);
      if (!pass_) return absl::UnavailableError("the release is lost");
    }
    return ForwardingBackend::Release(call);
  }

  void pass() {
    absl::MutexLock lock(&mu_);
    pass_ = true;
  }
  std::vector<absl::Duration> keeps() const {
    absl::MutexLock lock(&mu_);
    return keeps_;
  }
  // Waits (real time) until `count` releases were asked.
  bool AwaitCalls(size_t count) const {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (keeps().size() < count) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(2));
    }
    return true;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<absl::Duration> keeps_ ABSL_GUARDED_BY(mu_);
  bool pass_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(KeepRetryTest, ARetryWithLittleOfTheKeepLeftStillKeeps) {
  auto clock = std::make_shared<ManualClock>();
  KeepRecorder* recorder = nullptr;
  ClientOptions options;
  options.clock = clock;
  options.backend_decorator = [&](std::unique_ptr<Backend> backend) {
    auto wrapped = std::make_unique<KeepRecorder>(std::move(backend));
    recorder = wrapped.get();
    return std::unique_ptr<Backend>(std::move(wrapped));
  };
  static int run = 0;  // each its own instance, with its own clock
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(
      absl::StrCat("memory://keep-retry-", getpid(), "-", run++), options);
  ASSERT_OK(client);
  absl::StatusOr<Hold> hold =
      (*(*client)->GetLock("kept"))->Acquire({.lease = absl::Minutes(1)});
  ASSERT_OK(hold);
  EXPECT_EQ(hold->ReleaseAndKeepFor(absl::Seconds(20)).code(),
            absl::StatusCode::kUnavailable);
  // The background retry goes out at once, and is lost too.
  ASSERT_TRUE(recorder->AwaitCalls(2));
  // The next one (due a second later) goes out with 5 ms of the keep left:
  // less than the backend's smallest lease, more than nothing.
  recorder->pass();
  clock->Advance(absl::Seconds(20) - absl::Milliseconds(5));
  ASSERT_TRUE(recorder->AwaitCalls(3));
  const std::vector<absl::Duration> keeps = recorder->keeps();
  EXPECT_EQ(keeps[0], absl::Seconds(20));
  EXPECT_GT(keeps[2], absl::ZeroDuration());
  EXPECT_LE(keeps[2], absl::Milliseconds(10));
}

}  // namespace
}  // namespace dlock
