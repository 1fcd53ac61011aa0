// Copyright dlock authors. 16 clients hammering 4 names, in each mode, for
// DLOCK_PG_STRESS_SECONDS (default 20) seconds: nobody is ever inside with
// another, fencing tokens only grow, and no error other than
// DeadlineExceeded on a caller's own wait reaches a caller.
#include <atomic>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "postgres_server.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

constexpr int kClients = 16;
constexpr int kNames = 4;

absl::Duration StressDuration() {
  const char* env = std::getenv("DLOCK_PG_STRESS_SECONDS");
  int seconds = 20;
  if (env != nullptr && !absl::SimpleAtoi(env, &seconds)) seconds = 20;
  return absl::Seconds(seconds);
}

struct NameState {
  std::atomic<int> inside{0};
  absl::Mutex mu;
  uint64_t last_token ABSL_GUARDED_BY(mu) = 0;
};

struct Tally {
  std::atomic<int64_t> acquired{0};
  std::atomic<int64_t> timed_out{0};
  std::atomic<int64_t> overlaps{0};
  std::atomic<int64_t> token_regressions{0};
  absl::Mutex mu;
  std::vector<std::string> errors ABSL_GUARDED_BY(mu);

  void Error(const absl::Status& s) {
    absl::MutexLock lock(&mu);
    if (errors.size() < 20) errors.push_back(s.ToString());
  }
};

void Hammer(LockClient& client, int seed, absl::Time until, NameState* names,
            Tally& tally) {
  std::mt19937 random(seed);
  std::vector<std::unique_ptr<DistributedLock>> locks;
  for (int i = 0; i < kNames; ++i) {
    locks.push_back(*client.GetLock(absl::StrCat("hot name ", i)));
  }
  AcquireOptions options;
  options.wait = absl::Milliseconds(500);
  if (seed % 2 == 0) options.lease = absl::Seconds(10);  // half use watchdog
  while (absl::Now() < until) {
    const int i = static_cast<int>(random() % kNames);
    absl::StatusOr<Hold> got = locks[i]->Acquire(options);
    if (!got.ok()) {
      if (got.status().code() == absl::StatusCode::kDeadlineExceeded) {
        ++tally.timed_out;
      } else {
        tally.Error(got.status());
      }
      continue;
    }
    ++tally.acquired;
    if (names[i].inside.fetch_add(1) != 0) ++tally.overlaps;
    {
      absl::MutexLock lock(&names[i].mu);
      if (got->fencing_token() <= names[i].last_token) {
        ++tally.token_regressions;
      }
      names[i].last_token = got->fencing_token();
    }
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 2000));
    names[i].inside.fetch_sub(1);
    if (absl::Status s = got->Release(); !s.ok()) tally.Error(s);
  }
}

class PostgresStressTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PostgresStressTest, SixteenClientsFourNamesNoOverlapNoErrors) {
  absl::StatusOr<std::unique_ptr<PostgresServer>> server =
      PostgresServer::Start();
  ASSERT_OK(server);
  const std::string ns = absl::StrCat("stress_", GetParam());
  std::vector<std::unique_ptr<LockClient>> clients;
  for (int c = 0; c < kClients; ++c) {
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        Connect((*server)->Uri(ns, "mode=" + GetParam()));
    ASSERT_OK(client);
    clients.push_back(*std::move(client));
  }
  NameState names[kNames];
  Tally tally;
  const absl::Time until = absl::Now() + StressDuration();
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back(
        [&, c] { Hammer(*clients[c], c + 1, until, names, tally); });
  }
  for (std::thread& t : threads) t.join();
  for (auto& client : clients) EXPECT_OK(client->Close());

  std::cout << GetParam() << ": " << tally.acquired << " acquisitions, "
            << tally.timed_out << " waits timed out, in "
            << absl::FormatDuration(StressDuration()) << "\n";
  EXPECT_EQ(tally.overlaps, 0);
  EXPECT_EQ(tally.token_regressions, 0);
  EXPECT_GT(tally.acquired, 100);
  absl::MutexLock lock(&tally.mu);
  EXPECT_TRUE(tally.errors.empty())
      << tally.errors.size() << " errors, first: " << tally.errors[0];
}

INSTANTIATE_TEST_SUITE_P(Modes, PostgresStressTest,
                         ::testing::Values("lease", "session"));

}  // namespace
}  // namespace dlock::test
