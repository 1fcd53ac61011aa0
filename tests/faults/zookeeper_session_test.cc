// Copyright dlock authors. A zk:// holder whose session expires while its
// process is stopped (SIGSTOP past the session timeout) is told the lock is
// lost when it resumes, and its release cannot remove the new holder's node
// (the class of bug of CURATOR-206 and CURATOR-604).
//
// The holder is this binary forked before the test makes any client or
// thread; it talks to the test over two pipes, one line per message.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "status_testing.h"
#include "zookeeper_server.h"

namespace dlock::test {
namespace {

constexpr absl::Duration kSessionTimeout = absl::Seconds(2);
constexpr char kLockName[] = "held through a session expiry";

void WriteLine(int fd, const std::string& line) {
  const std::string text = line + "\n";
  if (write(fd, text.data(), text.size()) < 0) _exit(3);
}

// Reads one line, or "" when nothing came within `timeout`.
std::string ReadLine(int fd, absl::Duration timeout) {
  std::string line;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    fd_set read_set;
    FD_ZERO(&read_set);
    FD_SET(fd, &read_set);
    timeval tv{0, 50 * 1000};
    if (select(fd + 1, &read_set, nullptr, nullptr, &tv) <= 0) continue;
    char c;
    if (read(fd, &c, 1) != 1) break;
    if (c == '\n') return line;
    line.push_back(c);
  }
  return "";
}

// The holder process: takes the lock (watchdog-renewed, so that only the
// session's end can free it), reports lost events, releases on request.
[[noreturn]] void RunHolder(const std::string& uri, int to_test,
                            int from_test) {
  LockLostCallback on_lost = [to_test](const LockLostEvent& event) {
    WriteLine(to_test, absl::StrCat("LOST ", event.reason.ToString()));
  };
  ClientOptions options;
  options.watchdog_lease = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri, options);
  if (!client.ok()) {
    WriteLine(to_test, absl::StrCat("ERROR ", client.status().ToString()));
    _exit(1);
  }
  absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
      (*client)->GetLock(kLockName);
  AcquireOptions acquire;
  acquire.wait = absl::Seconds(10);
  acquire.on_lost = on_lost;
  absl::StatusOr<Hold> held = (*lock)->Acquire(acquire);
  if (!held.ok()) {
    WriteLine(to_test, absl::StrCat("ERROR ", held.status().ToString()));
    _exit(1);
  }
  WriteLine(to_test, absl::StrCat("HELD ", held->fencing_token()));
  if (ReadLine(from_test, absl::Seconds(60)) != "RELEASE") _exit(2);
  const absl::Status released = held->Release();
  WriteLine(to_test,
            absl::StrCat("RELEASED ", absl::StatusCodeToString(released.code()),
                         " STATE ", static_cast<int>(held->state())));
  _exit(0);
}

TEST(ZooKeeperSessionExpiry, StoppedHolderLearnsLossAndCannotTouchNewHolder) {
  absl::StatusOr<std::unique_ptr<ZooKeeperServer>> server =
      ZooKeeperServer::Start();
  ASSERT_OK(server);
  const std::string uri = (*server)->Uri(
      "session-expiry",
      absl::StrCat("session_timeout=",
                   absl::ToInt64Milliseconds(kSessionTimeout), "ms"));

  int to_test[2];
  int from_test[2];
  ASSERT_EQ(pipe(to_test), 0);
  ASSERT_EQ(pipe(from_test), 0);
  const pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    close(to_test[0]);
    close(from_test[1]);
    RunHolder(uri, to_test[1], from_test[0]);
  }
  close(to_test[1]);
  close(from_test[0]);
  const int from_holder = to_test[0];
  const int to_holder = from_test[1];
  struct Reap {
    pid_t pid;
    ~Reap() {
      kill(pid, SIGCONT);
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reap{holder};

  const std::string held = ReadLine(from_holder, absl::Seconds(20));
  uint64_t old_token = 0;
  absl::string_view token_text = held;
  ASSERT_TRUE(absl::ConsumePrefix(&token_text, "HELD ")) << held;
  ASSERT_TRUE(absl::SimpleAtoi(token_text, &old_token)) << held;

  // Stop the holder past its session timeout: it cannot ping, so the
  // ensemble expires its session and removes its node.
  ASSERT_EQ(kill(holder, SIGSTOP), 0);
  const absl::Time stopped = absl::Now();
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
  ASSERT_OK(client);
  absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
      (*client)->GetLock(kLockName);
  ASSERT_OK(lock);
  AcquireOptions wait;
  wait.wait = absl::Seconds(20);
  wait.lease = absl::Seconds(60);
  absl::StatusOr<Hold> taken = (*lock)->Acquire(wait);
  ASSERT_OK(taken);
  const absl::Duration blocked = absl::Now() - stopped;
  EXPECT_GT(taken->fencing_token(), old_token);
  // Freed by the session's expiry: about the session timeout, never sooner
  // than most of it, and well before the 30s lease.
  EXPECT_GE(blocked, kSessionTimeout * 0.6);
  EXPECT_LE(blocked, kSessionTimeout + absl::Seconds(5));
  absl::StatusOr<LockInfo> before = (*client)->Admin().Inspect(kLockName);
  ASSERT_OK(before);

  // Resumed, the old holder is told; then its release must fail.
  ASSERT_EQ(kill(holder, SIGCONT), 0);
  const std::string lost = ReadLine(from_holder, absl::Seconds(15));
  EXPECT_TRUE(absl::StartsWith(lost, "LOST ")) << "got '" << lost << "'";
  WriteLine(to_holder, "RELEASE");
  const std::string released = ReadLine(from_holder, absl::Seconds(15));
  EXPECT_EQ(released, absl::StrCat("RELEASED FAILED_PRECONDITION STATE ",
                                   static_cast<int>(LockState::kNotHeld)))
      << "the old holder's release did not fail as not held";

  // The new hold is exactly as it was.
  absl::StatusOr<LockInfo> after = (*client)->Admin().Inspect(kLockName);
  ASSERT_OK(after);
  EXPECT_TRUE(after->locked);
  EXPECT_EQ(after->owner, (*client)->CurrentOwner());
  EXPECT_EQ(after->fencing_token, taken->fencing_token());
  EXPECT_EQ(after->hold_count, before->hold_count);
  EXPECT_EQ(taken->state(), LockState::kHeld);
  EXPECT_OK(taken->Release());
}

// A holder cut off from ZooKeeper (here: the server stopped with SIGSTOP, as
// a partition would look) is told its hold is lost once the ensemble may
// have expired its session, which is before anyone else can have it; when the
// server is back, its node goes and another client gets the lock.
TEST(ZooKeeperSessionExpiry, CutOffHolderIsToldItLostTheLock) {
  constexpr absl::Duration kTimeout = absl::Seconds(3);
  absl::StatusOr<std::unique_ptr<ZooKeeperServer>> server =
      ZooKeeperServer::Start();
  ASSERT_OK(server);
  const std::string uri = (*server)->Uri(
      "cut-off", absl::StrCat("session_timeout=",
                              absl::ToInt64Milliseconds(kTimeout), "ms"));
  absl::Mutex mu;
  absl::Time lost_at = absl::InfiniteFuture();
  ClientOptions options;
  // A lease far past the test: only the session can end this hold.
  options.watchdog_lease = absl::Seconds(60);
  options.on_lost = [&](const LockLostEvent&) {
    absl::MutexLock lock(&mu);
    lost_at = std::min(lost_at, absl::Now());
  };
  absl::StatusOr<std::unique_ptr<LockClient>> holder = Connect(uri, options);
  ASSERT_OK(holder);
  auto held = (*holder)->GetLock("cut off");
  ASSERT_OK(held);
  absl::StatusOr<Hold> holding = (*held)->Acquire();
  ASSERT_OK(holding);

  (*server)->PauseMember(0);
  const absl::Time paused = absl::Now();
  // The C client gives up on a silent server after 2/3 of the timeout; the
  // hold is reported lost a little after that, well within the timeout.
  bool told = false;
  while (!told && absl::Now() - paused < kTimeout * 3) {
    absl::SleepFor(absl::Milliseconds(20));
    absl::MutexLock lock(&mu);
    told = lost_at != absl::InfiniteFuture();
  }
  (*server)->ResumeMember(0);
  ASSERT_TRUE(told) << "no lost notification while cut off";
  EXPECT_LE(lost_at - paused, kTimeout + absl::Milliseconds(500));
  std::printf("told of the loss %s after the server stopped answering\n",
              absl::FormatDuration(lost_at - paused).c_str());
  EXPECT_EQ(holding->state(), LockState::kLost);
  EXPECT_TRUE(absl::IsFailedPrecondition(holding->Release()));

  absl::StatusOr<std::unique_ptr<LockClient>> other = Connect(uri);
  ASSERT_OK(other);
  auto lock = (*other)->GetLock("cut off");
  ASSERT_OK(lock);
  AcquireOptions wait;
  wait.wait = absl::Seconds(20);
  wait.lease = absl::Seconds(60);
  absl::StatusOr<Hold> taken = (*lock)->Acquire(wait);
  ASSERT_OK(taken);
  {
    absl::MutexLock guard(&mu);
    EXPECT_LT(lost_at, absl::Now());
  }
  EXPECT_OK(taken->Release());
}

}  // namespace
}  // namespace dlock::test
