// No password reaches an observer or a metrics page: a client connects to a
// real Redis with a password in its URI, and every event it tells (errors
// naming the endpoint included) and the rendered metrics are searched.
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/adapters/metrics.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "recording_observer.h"
#include "redis_server.h"

namespace dlock {
namespace {

// Forwards every event to both.
class BothObservers : public LockObserver {
 public:
  BothObservers(std::shared_ptr<LockObserver> a,
                std::shared_ptr<LockObserver> b)
      : a_(std::move(a)), b_(std::move(b)) {}
  void OnAcquireAttempt(const AcquireAttemptEvent& e) override {
    a_->OnAcquireAttempt(e);
    b_->OnAcquireAttempt(e);
  }
  void OnGrant(const GrantEvent& e) override {
    a_->OnGrant(e);
    b_->OnGrant(e);
  }
  void OnAcquireFailed(const AcquireFailedEvent& e) override {
    a_->OnAcquireFailed(e);
    b_->OnAcquireFailed(e);
  }
  void OnRelease(const ReleaseEvent& e) override {
    a_->OnRelease(e);
    b_->OnRelease(e);
  }
  void OnRenewal(const RenewalEvent& e) override {
    a_->OnRenewal(e);
    b_->OnRenewal(e);
  }
  void OnLoss(const LossEvent& e) override {
    a_->OnLoss(e);
    b_->OnLoss(e);
  }
  void OnReleaseFailure(const ReleaseFailureEvent& e) override {
    a_->OnReleaseFailure(e);
    b_->OnReleaseFailure(e);
  }
  void OnBackendCall(const BackendCallEvent& e) override {
    a_->OnBackendCall(e);
    b_->OnBackendCall(e);
  }

 private:
  const std::shared_ptr<LockObserver> a_;
  const std::shared_ptr<LockObserver> b_;
};

TEST(MetricsOnRedis, NoPasswordInAnyEventOrOnThePage) {
  constexpr char kPassword[] = "s3cret-pw-for-metrics";
  absl::StatusOr<std::unique_ptr<testing::RedisServer>> server =
      testing::RedisServer::Start({.requirepass = kPassword});
  ASSERT_TRUE(server.ok()) << server.status();
  auto recorded = std::make_shared<testing::RecordingObserver>();
  auto metrics = std::make_shared<PrometheusMetrics>();
  ClientOptions options;
  options.observer = std::make_shared<BothObservers>(recorded, metrics);
  options.watchdog_lease = absl::Milliseconds(300);
  const std::string uri =
      absl::StrCat("redis://:", kPassword, "@127.0.0.1:", (*server)->port(),
                   "?namespace=secret");
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri, options);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::unique_ptr<LockClient>> other =
      Connect(uri, ClientOptions{});
  ASSERT_TRUE(other.ok()) << other.status();

  std::unique_ptr<DistributedLock> lock = *(*client)->GetLock("guarded");
  absl::StatusOr<Hold> hold = lock->Acquire();
  ASSERT_TRUE(hold.ok()) << hold.status();
  // Renewed by the watchdog, then found gone, then lost.
  ASSERT_TRUE(recorded->WaitFor(testing::ObservedEvent::kRenewal, 1,
                                absl::Seconds(10)));
  ASSERT_TRUE((*other)->Admin().ForceUnlock("guarded").ok());
  ASSERT_TRUE(
      recorded->WaitFor(testing::ObservedEvent::kLoss, 1, absl::Seconds(10)));
  std::unique_ptr<DistributedLock> theirs = *(*other)->GetLock("busy");
  absl::StatusOr<Hold> busy = theirs->Acquire();
  ASSERT_TRUE(busy.ok());
  EXPECT_FALSE((*(*client)->GetLock("busy"))->TryAcquire().ok());
  absl::StatusOr<Hold> kept = lock->Acquire();
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE((*client)->Close().ok());  // a loss naming the endpoint
  EXPECT_FALSE(lock->Acquire().ok());    // an error naming the endpoint

  const std::string events = recorded->AllText();
  const std::string page = metrics->RenderText();
  // The errors do name where the client connects, redacted.
  EXPECT_TRUE(absl::StrContains(events, absl::StrCat((*server)->port())))
      << events;
  EXPECT_TRUE(absl::StrContains(events, "***")) << events;
  EXPECT_FALSE(absl::StrContains(events, kPassword)) << events;
  EXPECT_FALSE(absl::StrContains(page, kPassword)) << page;
  EXPECT_TRUE(absl::StrContains(
      page, "dlock_losses_total{namespace=\"secret\",cause=\"gone\"} 1\n"))
      << page;
  EXPECT_TRUE(absl::StrContains(
      page,
      "dlock_losses_total{namespace=\"secret\",cause=\"client_closed\"} 1\n"))
      << page;
}

}  // namespace
}  // namespace dlock
