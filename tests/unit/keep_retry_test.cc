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

namespace dlock {
namespace {

// Answers the first release Unavailable without sending it, and records
// the keep every release asked for.
class KeepRecorder : public ForwardingBackend {
 public:
  explicit KeepRecorder(std::unique_ptr<Backend> target)
      : ForwardingBackend(std::move(target)) {}

  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override {
    {
      absl::MutexLock lock(&mu_);
      keeps_.push_back(call.keep_for);
      if (keeps_.size() == 1) {
        return absl::UnavailableError("the first release is lost");
      }
    }
    return ForwardingBackend::Release(call);
  }

  std::vector<absl::Duration> keeps() const {
    absl::MutexLock lock(&mu_);
    return keeps_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<absl::Duration> keeps_ ABSL_GUARDED_BY(mu_);
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
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect(absl::StrCat("memory://keep-retry-", getpid()), options);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Hold> hold =
      (*(*client)->GetLock("kept"))->Acquire({.lease = absl::Minutes(1)});
  ASSERT_TRUE(hold.ok()) << hold.status();
  EXPECT_EQ(hold->ReleaseAndKeepFor(absl::Seconds(1)).code(),
            absl::StatusCode::kUnavailable);
  // The retry goes out with 5 ms of the keep left: less than the
  // backend's smallest lease, more than nothing.
  clock->Advance(absl::Milliseconds(995));
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (recorder->keeps().size() < 2 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  const std::vector<absl::Duration> keeps = recorder->keeps();
  ASSERT_EQ(keeps.size(), 2u);
  EXPECT_EQ(keeps[0], absl::Seconds(1));
  EXPECT_GT(keeps[1], absl::ZeroDuration());
  EXPECT_LE(keeps[1], absl::Milliseconds(10));
}

}  // namespace
}  // namespace dlock
