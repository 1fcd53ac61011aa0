// Copyright dlock authors. Conformance: recovery when the server goes away
// and comes back (C18), with the lost notifications it causes (C7) and
// shutdown while it is away (C13).
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "conformance_fixture.h"
#include "dlock/uri.h"

namespace dlock::test {
namespace {

// Whether `status` names where the client connects (C14), e.g. the host of
// "redis://127.0.0.1:6379".
::testing::AssertionResult NamesEndpoint(const absl::Status& status,
                                         const LockClient& client) {
  absl::StatusOr<Uri> uri = ParseUri(client.endpoint());
  if (!uri.ok() || uri->hosts.empty()) return ::testing::AssertionSuccess();
  if (absl::StrContains(status.message(), uri->hosts[0].host)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "'" << status.message() << "' does not name " << uri->hosts[0].host;
}

TEST_P(Conformance, C18_ServerRestartReportsLostAndClientReconnects) {
  ASSERT_TRUE(backend().restart) << MissingCapability("restart");
  ClientOptions options;
  options.watchdog_lease = kShortWatchdogLease;
  LostRecorder client_lost;
  options.on_lost = client_lost.Callback();
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient(options));
  ASSERT_OK_AND_ASSIGN(auto prober, NewClient());
  ASSERT_OK_AND_ASSIGN(auto held, holder->GetLock("through a restart"));
  ASSERT_OK_AND_ASSIGN(auto probe, prober->GetLock("probe"));
  LostRecorder hold_lost;
  AcquireOptions watched;
  watched.on_lost = hold_lost.Callback();
  ASSERT_OK_AND_ASSIGN(Hold before, held->Acquire(watched));
  // Kept for the whole test: nobody renews or releases it.
  ASSERT_OK_AND_ASSIGN(Hold probe_hold, probe->Acquire(WithLease(kLongLease)));

  ASSERT_OK(backend().restart());

  // A hold nobody renews shows whether the server kept its state.
  absl::StatusOr<LockInfo> probed = absl::UnknownError("not asked yet");
  ASSERT_TRUE(Eventually(
      [&] {
        probed = prober->Admin().Inspect("probe");
        return probed.ok();
      },
      kNoHang))
      << "the client did not reconnect by itself: " << probed.status();
  if (!probed->locked) {
    // State lost with the server: the hold is reported lost, once, and
    // nobody brings the lock back.
    ASSERT_TRUE(hold_lost.WaitForEvents(1, kNoHang)) << "no lost callback";
    ASSERT_TRUE(client_lost.WaitForEvents(1, kNoHang)) << "no client callback";
    EXPECT_EQ(hold_lost.Events()[0].fencing_token, before.fencing_token());
    EXPECT_TRUE(IsLost(hold_lost.Events()[0].reason))
        << hold_lost.Events()[0].reason;
    EXPECT_EQ(before.state(), LockState::kLost);
    EXPECT_CODE(before.Release(), kFailedPrecondition);
    ASSERT_OK_AND_ASSIGN(LockInfo info, prober->Admin().Inspect("probe"));
    EXPECT_FALSE(info.locked);
  } else {
    // State kept: the hold is either still ours or reported lost.
    absl::SleepFor(kShortWatchdogLease * 2);
    if (hold_lost.Events().empty()) {
      EXPECT_EQ(before.state(), LockState::kHeld);
      ASSERT_OK_AND_ASSIGN(LockInfo info,
                           holder->Admin().Inspect("through a restart"));
      EXPECT_EQ(info.owner, holder->CurrentOwner());
      EXPECT_EQ(info.fencing_token, before.fencing_token());
      EXPECT_OK(before.Release());
    } else {
      EXPECT_EQ(before.state(), LockState::kLost);
    }
  }

  // The same client works again without being told.
  ASSERT_OK_AND_ASSIGN(auto later, holder->GetLock("after the restart"));
  absl::StatusOr<Hold> acquired;
  ASSERT_TRUE(Eventually(
      [&] {
        acquired = later->TryAcquire();
        return acquired.ok();
      },
      kNoHang))
      << acquired.status();
  EXPECT_OK(acquired->Release());
  ASSERT_OK_AND_ASSIGN(Hold again,
                       held->Acquire(WithLease(kLongLease, kNoHang)));
  EXPECT_EQ(again.hold_count(), 1);
  EXPECT_EQ(again.state(), LockState::kHeld);
  EXPECT_OK(again.Release());
}

TEST_P(Conformance, C18_UnavailableWhileServerIsDownThenRecovers) {
  ASSERT_TRUE(backend().stop && backend().start)
      << MissingCapability("stop and start");
  ClientOptions options;
  options.watchdog_lease = kShortWatchdogLease;
  options.close_timeout = absl::Seconds(2);
  ASSERT_OK_AND_ASSIGN(auto client, NewClient(options));
  ASSERT_OK_AND_ASSIGN(auto closing, NewClient(options));
  ASSERT_OK_AND_ASSIGN(auto held, client->GetLock("renewed"));
  ASSERT_OK_AND_ASSIGN(auto other, client->GetLock("other"));
  ASSERT_OK_AND_ASSIGN(auto closing_lock, closing->GetLock("closing"));
  LostRecorder hold_lost;
  AcquireOptions watched;
  watched.on_lost = hold_lost.Callback();
  ASSERT_OK_AND_ASSIGN(Hold watched_hold, held->Acquire(watched));
  // Kept until its client closes.
  ASSERT_OK_AND_ASSIGN(Hold closing_hold,
                       closing_lock->Acquire(WithLease(kLongLease)));

  EXPECT_OK(backend().stop());
  bool started = false;
  // Later cases need the server, whatever happens here.
  absl::Cleanup restart = [&] {
    if (!started) backend().start().IgnoreError();
  };

  // A waiting acquire rides the outage out until its wait ends, then says
  // so, with the last error (docs/semantics.md, "Riding out a failover").
  const absl::Time waited_from = absl::Now();
  absl::StatusOr<Hold> waited =
      other->Acquire(WithLease(kLongLease, absl::Seconds(1)));
  const absl::Duration waited_for = absl::Now() - waited_from;
  EXPECT_CODE(waited, kUnavailable);
  EXPECT_TRUE(NamesEndpoint(waited.status(), *client)) << waited.status();
  EXPECT_TRUE(absl::StrContains(waited.status().message(),
                                "stayed unavailable for the whole wait"))
      << waited.status();
  EXPECT_GE(waited_for, absl::Seconds(1)) << "gave up before its wait ended";
  EXPECT_LT(waited_for, absl::Seconds(1) + kNoHang);

  // Every other call fails fast, with Unavailable naming the endpoint.
  absl::Time start = absl::Now();
  absl::StatusOr<Hold> tried = other->TryAcquire();
  EXPECT_CODE(tried, kUnavailable);
  EXPECT_TRUE(NamesEndpoint(tried.status(), *client));
  EXPECT_CODE(client->Admin().Inspect("other"), kUnavailable);
  EXPECT_CODE(client->Admin().ForceUnlock("other"), kUnavailable);
  // A renewal fails fast: Unavailable, or, where the backend already told
  // the client that the hold ended with the server (a PostgreSQL session),
  // FailedPrecondition for a hold known lost, which no renewal brings back.
  const absl::Status renewed = watched_hold.Renew();
  if (absl::IsFailedPrecondition(renewed)) {
    EXPECT_EQ(watched_hold.state(), LockState::kLost) << renewed;
  } else {
    EXPECT_CODE(renewed, kUnavailable);
  }
  EXPECT_LT(absl::Now() - start, kNoHang) << "calls did not fail fast";
  // Names are checked locally: nothing is sent, so no Unavailable.
  EXPECT_CODE(client->GetLock(""), kInvalidArgument);

  // The renewed hold cannot be kept: reported lost once its lease ran out.
  ASSERT_TRUE(hold_lost.WaitForEvents(1, kShortWatchdogLease + kNoHang))
      << "no lost callback while the server was down";
  EXPECT_TRUE(IsLost(hold_lost.Events()[0].reason))
      << hold_lost.Events()[0].reason;
  EXPECT_EQ(watched_hold.state(), LockState::kLost);

  // Closing is bounded even with nothing to release to.
  start = absl::Now();
  closing->Close().IgnoreError();  // Unavailable is fine: the lease frees it
  EXPECT_LT(absl::Now() - start, options.close_timeout + kNoHang);

  ASSERT_OK(backend().start());
  started = true;
  // The client reconnects by itself.
  absl::StatusOr<Hold> acquired;
  ASSERT_TRUE(Eventually(
      [&] {
        acquired = other->TryAcquire();
        return acquired.ok();
      },
      kNoHang))
      << "no reconnect: " << acquired.status();
  EXPECT_OK(acquired->Release());
  ASSERT_OK_AND_ASSIGN(Hold again,
                       held->Acquire(WithLease(kLongLease, kNoHang)));
  EXPECT_EQ(again.hold_count(), 1);
  EXPECT_EQ(again.state(), LockState::kHeld);
  EXPECT_OK(again.Release());
}

}  // namespace
}  // namespace dlock::test
