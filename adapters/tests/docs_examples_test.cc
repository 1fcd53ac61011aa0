// The C++ examples of docs/adapters.md, run. docs_test.cc checks that every
// ```cpp block of that page appears in this file, so the page cannot drift
// from code that compiles and passes.
#include <iostream>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/adapters/config.h"
#include "dlock/adapters/job_guard.h"
#include "dlock/adapters/std_mutex.h"
#include "dlock/adapters/std_shared_mutex.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "status_testing.h"
#include "test_util.h"

namespace {

std::vector<std::string> transfers;
void Transfer(int from, int to, uint64_t fence) {
  transfers.push_back(absl::StrCat(from, "->", to, "@", fence));
}
std::vector<int> batches;
void WriteBatch(int batch, uint64_t /*fence*/) { batches.push_back(batch); }
absl::Status SendInvoices(const std::string& /*day*/, uint64_t fence,
                          const dlock::CancelToken& cancel) {
  if (cancel.IsCancelled() || fence == 0) return absl::AbortedError("stop");
  return absl::OkStatus();
}

absl::Status StdAdapterExample() {
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
      dlock::Connect("memory://docs");
  if (!client.ok()) return client.status();
  // Throws std::system_error (invalid_argument) for a name C15 refuses;
  // DistributedMutex::Create() says it as a Status instead.
  dlock::DistributedMutex from(**client, "account/17");
  dlock::DistributedMutex to(**client, "account/42");
  std::mutex local_cache;
  {
    // Takes all three without deadlock, in any order, like std::mutex.
    std::scoped_lock lock(from, to, local_cache);
    Transfer(17, 42, /*fence=*/*from.fencing_token());
  }
  return absl::OkStatus();
}

bool TryLockForExample(std::unique_ptr<dlock::DistributedMutex>& mutex) {
  std::unique_lock<dlock::DistributedMutex> lock(*mutex, std::defer_lock);
  if (!lock.try_lock_for(std::chrono::milliseconds(200))) {
    return false;  // another owner has it
  }
  return true;
}

std::vector<uint64_t> reads, writes;
void Read(uint64_t fence) { reads.push_back(fence); }
void Write(uint64_t fence) { writes.push_back(fence); }

absl::Status SharedMutexExample() {
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
      dlock::Connect("memory://docs-shared");
  if (!client.ok()) return client.status();
  dlock::DistributedSharedMutex catalog(**client, "catalog");
  {
    std::shared_lock<dlock::DistributedSharedMutex> reading(catalog);
    // Readers in other processes hold it at the same time; a writer waits.
    Read(/*fence=*/*catalog.shared_fencing_token());
  }
  {
    std::unique_lock<dlock::DistributedSharedMutex> writing(catalog);
    Write(/*fence=*/*catalog.fencing_token());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<dlock::LockClient>> ConnectWithHook(
    const std::string& uri) {
  dlock::ClientOptions options;
  options.on_release_error = [](absl::string_view name, const absl::Status& s) {
    std::cerr << "release of " << name << " failed: " << s.message() << "\n";
  };
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
      dlock::Connect(uri, options);
  return client;
}

absl::Status HoldExample(dlock::LockClient& client) {
  absl::StatusOr<dlock::Hold> hold =
      client.Acquire("reindex", {.wait = absl::Seconds(5)});
  if (!hold.ok()) return hold.status();
  for (int batch = 0; batch < 100 && !hold->lost_token().IsCancelled();
       ++batch) {
    WriteBatch(batch, hold->fencing_token());
  }
  if (hold->lost()) return hold->lost_reason();
  return absl::OkStatus();  // the Hold's destructor releases
}

absl::Status ConfigExample(const std::string& config_path) {
  absl::StatusOr<dlock::Config> config = dlock::LoadConfig(config_path);
  if (!config.ok()) return config.status();  // "file:line: key: what is wrong"
  absl::StatusOr<dlock::Profile> profile = config->Find("local");
  if (!profile.ok()) return profile.status();
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
      dlock::ConnectProfile(*profile);
  if (!client.ok()) return client.status();
  return absl::OkStatus();
}

absl::Status EnvExample() {
  // DLOCK_BACKEND=redis://host:6379, or DLOCK_PROFILE + DLOCK_CONFIG.
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
      dlock::ConnectFromEnv();
  if (!client.ok()) return client.status();
  return absl::OkStatus();
}

absl::StatusOr<dlock::JobOutcome> JobExample(dlock::LockClient& client) {
  dlock::ScheduledJobGuard scheduler(client);
  absl::StatusOr<dlock::JobResult> result = scheduler.Run(
      "invoice-run",
      {.lock_at_most_for = absl::Minutes(30),
       .lock_at_least_for = absl::Seconds(1),
       .slot = "2026-11-22"},
      [](const dlock::JobContext& job) {
        return SendInvoices(job.slot, job.fencing_token, job.cancel);
      });
  if (!result.ok()) return result.status();
  return result->outcome;  // kRan, kSkippedRunning or kSkippedRecentlyRan
}

TEST(DocsExamplesTest, StdAdapter) {
  ASSERT_OK(StdAdapterExample());
  ASSERT_EQ(transfers.size(), 1u);
  auto client = dlock::Connect("memory://docs-try");
  auto a = dlock::DistributedMutex::Create(**client, "m");
  ASSERT_TRUE(TryLockForExample(*a));
}

TEST(DocsExamplesTest, SharedMutex) {
  ASSERT_OK(SharedMutexExample());
  ASSERT_EQ(reads.size(), 1u);
  ASSERT_EQ(writes.size(), 1u);
  // The writer came after the reader: a larger token (C23).
  EXPECT_GT(writes[0], reads[0]);
}

TEST(DocsExamplesTest, Hold) {
  auto client = ConnectWithHook("memory://docs-hold");
  ASSERT_OK(client);
  EXPECT_OK(HoldExample(**client));
  EXPECT_EQ(batches.size(), 100u);
  // Released when the example returned.
  EXPECT_FALSE((*client)->Admin().Inspect("reindex")->locked);
}

TEST(DocsExamplesTest, Config) {
  absl::StatusOr<std::string> dir = dlock::test::MakeTempDir("dlock-docs");
  ASSERT_OK(dir);
  dlock::test::WriteFile(*dir + "/dlock.toml",
                         "[profiles.local]\nbackend = \"memory://docs\"\n");
  EXPECT_OK(ConfigExample(*dir + "/dlock.toml"));
  setenv("DLOCK_BACKEND", "memory://docs-env", 1);
  EXPECT_OK(EnvExample());
  unsetenv("DLOCK_BACKEND");
  dlock::test::RemoveTree(*dir);
}

// README.md's first example, run as the program it is (a backend from
// DLOCK_BACKEND, like any service).
TEST(DocsExamplesTest, ReadmeExampleRuns) {
  dlock::test::Result r = dlock::test::RunProcess(
      {DLOCK_README_EXAMPLE_PATH}, {"DLOCK_BACKEND=memory://readme"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "settled under fencing token 1\naccount 17 credited 500 cents\n");
  EXPECT_EQ(r.err, "");
  dlock::test::Result unset =
      dlock::test::RunProcess({DLOCK_README_EXAMPLE_PATH}, {"DLOCK_BACKEND="});
  EXPECT_EQ(unset.code, 1);
  EXPECT_TRUE(absl::StartsWith(unset.err, "dlock: ")) << unset.err;
}

TEST(DocsExamplesTest, JobGuard) {
  auto a = dlock::Connect("memory://docs-job");
  auto b = dlock::Connect("memory://docs-job");
  EXPECT_EQ(*JobExample(**a), dlock::JobOutcome::kRan);
  EXPECT_EQ(*JobExample(**b), dlock::JobOutcome::kSkippedRecentlyRan);
}

}  // namespace
