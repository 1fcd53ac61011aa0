// Copyright dlock authors. A client's LISTEN must be in place when Connect()
// returns: a release announced right after a fresh client began to wait must
// wake it (C9), not leave it to its fallback poll.
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "postgres_server.h"
#include "postgres_suite.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

class PostgresListenTest : public PostgresSuite {};

// Far longer than a wake-up may take: a waiter granted much sooner than this
// was woken by the release, not polled.
constexpr absl::Duration kSlowFallbackPoll = absl::Seconds(5);
constexpr absl::Duration kPromptly = absl::Seconds(1);

// A waiter on a client created just now, released to at once: many rounds,
// each with fresh clients, since the window in which a release could go
// unheard is the few milliseconds after Connect().
void WaiterOfAFreshClientIsWoken(PostgresServer& server,
                                 const std::string& mode, int rounds) {
  std::mt19937 random(std::random_device{}());
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(absl::StrCat(mode, " round ", round));
    const std::string uri =
        server.Uri(absl::StrCat("listen_", mode), "mode=" + mode);
    const std::string name = absl::StrCat("handed over ", round);
    absl::StatusOr<std::unique_ptr<LockClient>> holder = Connect(uri);
    ASSERT_OK(holder);
    auto held = *(*holder)->GetLock(name);
    AcquireOptions long_lease;
    long_lease.lease = absl::Seconds(60);  // its end wakes nobody here
    absl::StatusOr<Hold> holding = held->Acquire(long_lease);
    ASSERT_OK(holding);

    ClientOptions options;
    options.fallback_poll = kSlowFallbackPoll;
    absl::StatusOr<std::unique_ptr<LockClient>> waiter = Connect(uri, options);
    ASSERT_OK(waiter);
    auto wanted = *(*waiter)->GetLock(name);
    absl::Notification started;
    absl::StatusOr<Hold> got = absl::UnknownError("not done");
    absl::Time granted_at;
    absl::Status released = absl::UnknownError("not released");
    std::thread thread([&] {
      AcquireOptions wait;
      wait.lease = absl::Seconds(60);
      wait.wait = absl::Seconds(30);
      started.Notify();
      got = wanted->Acquire(wait);
      granted_at = absl::Now();
      // Released from the waiter's thread, which acquired it.
      if (got.ok()) released = got->Release();
    });
    started.WaitForNotification();
    // Release within the first few milliseconds of the waiter's life, when
    // its first attempt has (usually) just marked the row wanted.
    absl::SleepFor(absl::Microseconds(
        std::uniform_int_distribution<int>(500, 4000)(random)));
    const absl::Time released_at = absl::Now();
    EXPECT_OK(holding->Release());
    thread.join();
    ASSERT_OK(got);
    EXPECT_LT(granted_at - released_at, kPromptly)
        << "the waiter slept its fallback poll: the release was not heard";
    EXPECT_OK(released);
  }
}

TEST_F(PostgresListenTest, LeaseModeWaiterHearsTheFirstRelease) {
  WaiterOfAFreshClientIsWoken(*server_, "lease", 30);
}

TEST_F(PostgresListenTest, SessionModeWaiterHearsTheFirstRelease) {
  WaiterOfAFreshClientIsWoken(*server_, "session", 30);
}

}  // namespace
}  // namespace dlock::test
