// Copyright dlock authors. The etcd client when its process's wall clock is
// stepped back an hour (an NTP step, an operator's `date -s`): its
// keepalives, call deadlines and waits run on the monotonic clock, so the
// step neither stops the keepalives of its leases nor expires its calls at
// once. The client runs in a child process of this test under libfaketime,
// which fakes only the wall clock (DONT_FAKE_MONOTONIC) and reads the offset
// anew from a file on every call (FAKETIME_NO_CACHE): the child steps its
// own clock by writing it.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "etcd_client_test_util.h"
#include "gmock/gmock.h"
#include "server_process.h"

namespace dlock::test {
namespace {

constexpr char kFakeTime[] =
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
constexpr char kEndpointVar[] = "DLOCK_WALL_CLOCK_TEST_ENDPOINT";
constexpr char kOffsetFileVar[] = "FAKETIME_TIMESTAMP_FILE";

void SetWallClockOffset(const std::string& offset) {
  const char* path = std::getenv(kOffsetFileVar);
  ASSERT_NE(path, nullptr) << kOffsetFileVar << " unset: run by the parent";
  std::ofstream(path, std::ios::trunc) << offset << "\n";
}

class EtcdWallClockTest : public EtcdServerSuite<EtcdWallClockTest> {
 public:
  static EtcdServer::Options ServerOptions() { return {}; }
};

// The child's part, run only by WallClockStepBackKeepsLeasesAndDeadlines.
TEST(EtcdWallClockChild, DISABLED_SteppedBack) {
  const char* endpoint = std::getenv(kEndpointVar);
  ASSERT_NE(endpoint, nullptr) << kEndpointVar << " unset: run by the parent";
  etcd::ClientOptions options;
  options.endpoints = {endpoint};
  ASSERT_OK_AND_ASSIGN(auto client, etcd::Client::Create(options));
  ASSERT_OK_AND_ASSIGN(auto lease, client->LeaseGrant(absl::Seconds(2)));
  const std::string key = TestKey();
  MustPut(*client, key, "kept", lease.id());
  client->leases().Keep(lease.id(), absl::Milliseconds(500), [] {});

  const absl::Time before = absl::Now();
  SetWallClockOffset("-3600s");
  ASSERT_LT(absl::Now(), before - absl::Minutes(59)) << "libfaketime inactive";
  // A call's deadline is not an hour past already.
  EXPECT_OK(client->leases().KeepAliveOnce(
      lease.id(), etcd::MonotonicNow() + absl::Seconds(5)));
  // Two TTLs: the lease lives on only if the keepalives went on.
  absl::SleepFor(absl::Seconds(4));
  EXPECT_EQ(Get(*client, key), "kept") << "the lease ended: keepalives stopped";
  SetWallClockOffset("+0s");
  absl::SleepFor(absl::Seconds(2));
  EXPECT_EQ(Get(*client, key), "kept") << "keepalives stopped after the step";
}

TEST_F(EtcdWallClockTest, WallClockStepBackKeepsLeasesAndDeadlines) {
  ASSERT_EQ(access(kFakeTime, R_OK), 0)
      << kFakeTime
      << " is missing: install it with `apt-get install -y libfaketime` "
         "(scripts/install-deps.sh does this)";
  ASSERT_OK_AND_ASSIGN(std::string dir, MakeTempDir("dlock-wall-clock"));
  const std::string offset_file = dir + "/faketime";
  std::ofstream(offset_file) << "+0s\n";
  absl::StatusOr<std::string> output =
      RunCommand({"/proc/self/exe", "--gtest_also_run_disabled_tests",
                  "--gtest_filter=EtcdWallClockChild.DISABLED_SteppedBack"},
                 "",
                 {absl::StrCat("LD_PRELOAD=", kFakeTime),
                  absl::StrCat(kOffsetFileVar, "=", offset_file),
                  "FAKETIME_NO_CACHE=1", "DONT_FAKE_MONOTONIC=1",
                  absl::StrCat(kEndpointVar, "=", server_->Endpoints()[0])},
                 absl::Seconds(60));
  ASSERT_OK(output);
  EXPECT_THAT(*output, ::testing::HasSubstr("[  PASSED  ] 1"));
}

}  // namespace
}  // namespace dlock::test
