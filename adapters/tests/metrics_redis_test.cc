// No password reaches an observer or a metrics page: a client connects to a
// real Redis with a password in its URI, and every event it tells (errors
// naming the endpoint included) and the rendered metrics are searched.
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/adapters/metrics.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "recording_observer.h"
#include "redis_server.h"
#include "status_testing.h"

namespace dlock {
namespace {

// What a client of `uri` does while `observer` watches: acquires, renewals
// by the watchdog, a loss found by a renewal, a failed attempt, and Close()
// and an attempt after it, whose errors name the endpoint.
void Scenario(const std::string& uri, std::shared_ptr<LockObserver> observer,
              test::RecordingObserver& recorded) {
  ClientOptions options;
  options.observer = std::move(observer);
  options.watchdog_lease = absl::Milliseconds(300);
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri, options);
  ASSERT_OK(client);
  absl::StatusOr<std::unique_ptr<LockClient>> other =
      Connect(uri, ClientOptions{});
  ASSERT_OK(other);

  std::unique_ptr<DistributedLock> lock = *(*client)->GetLock("guarded");
  absl::StatusOr<Hold> hold = lock->Acquire();
  ASSERT_OK(hold);
  // Renewed by the watchdog (the recorder sees every client's events), then
  // found gone, then lost.
  ASSERT_TRUE(
      recorded.WaitFor(test::ObservedEvent::kRenewal, 1, absl::Seconds(10)));
  ASSERT_OK((*other)->Admin().ForceUnlock("guarded"));
  for (int i = 0; i < 500 && !hold->lost(); ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(hold->lost());
  std::unique_ptr<DistributedLock> theirs = *(*other)->GetLock("busy");
  absl::StatusOr<Hold> busy = theirs->Acquire();
  ASSERT_OK(busy);
  EXPECT_FALSE((*(*client)->GetLock("busy"))->TryAcquire().ok());
  absl::StatusOr<Hold> kept = lock->Acquire();
  ASSERT_OK(kept);
  ASSERT_OK((*client)->Close());       // a loss naming the endpoint
  EXPECT_FALSE(lock->Acquire().ok());  // an error naming the endpoint
}

TEST(MetricsOnRedis, NoPasswordInAnyEventOrOnThePage) {
  constexpr char kPassword[] = "s3cret-pw-for-metrics";
  absl::StatusOr<std::unique_ptr<test::RedisServer>> server =
      test::RedisServer::Start({.requirepass = kPassword});
  ASSERT_OK(server);
  const std::string uri =
      absl::StrCat("redis://:", kPassword, "@127.0.0.1:", (*server)->port(),
                   "?namespace=secret");
  auto recorded = std::make_shared<test::RecordingObserver>();
  Scenario(uri, recorded, *recorded);
  auto metrics = std::make_shared<PrometheusMetrics>();
  Scenario(uri, metrics, *recorded);

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
