// TOML profiles on every backend of this build: connect_timeout and
// operation_timeout are dlock's common options, so a profile that sets them
// connects whatever the scheme, and each backend honours them.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "backend_servers.h"
#include "dlock/adapters/config.h"
#include "dlock/uri.h"
#include "fault_proxy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

using test::Admission;
using test::FaultProxy;

// A profile named "p" with `keys` (TOML lines) on `uri`.
absl::StatusOr<Profile> ProfileFor(const std::string& uri,
                                   absl::string_view keys) {
  absl::StatusOr<Config> config =
      ParseConfig(absl::StrCat("[profiles.p]\nbackend = \"", uri, "\"\n", keys),
                  "timeouts.toml");
  if (!config.ok()) return config.status();
  return config->Find("p");
}

absl::StatusOr<std::unique_ptr<LockClient>> ConnectWith(
    const std::string& uri, absl::string_view keys) {
  absl::StatusOr<Profile> profile = ProfileFor(uri, keys);
  if (!profile.ok()) return profile.status();
  return ConnectProfile(*profile);
}

void ConnectsAndLocks(const std::string& uri, absl::string_view keys) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = ConnectWith(uri, keys);
  ASSERT_OK(client) << uri << " with " << keys;
  absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
      (*client)->GetLock("profile-timeouts");
  ASSERT_OK(lock);
  absl::StatusOr<Hold> hold = (*lock)->TryAcquire();
  ASSERT_OK(hold) << uri;
  EXPECT_OK(hold->Release()) << uri;
}

// `uri` with the server's port replaced by `port` (a proxy's).
std::string At(const std::string& uri, int port) {
  absl::StatusOr<Uri> parsed = ParseUri(uri);
  if (!parsed.ok() || parsed->hosts.size() != 1 ||
      !parsed->hosts[0].port.has_value()) {
    ADD_FAILURE() << "not a one-host URI with a port: " << uri;
    return uri;
  }
  return absl::StrReplaceAll(uri, {{absl::StrCat(":", *parsed->hosts[0].port),
                                    absl::StrCat(":", port)}});
}

// The port of the server `uri` names.
int PortOf(const std::string& uri) {
  absl::StatusOr<Uri> parsed = ParseUri(uri);
  return parsed.ok() && !parsed->hosts.empty()
             ? parsed->hosts[0].port.value_or(0)
             : 0;
}

TEST(ProfileTimeouts, MemoryTakesTheCommonOptions) {
  ConnectsAndLocks("memory://profile-timeouts",
                   "connect_timeout = \"2s\"\noperation_timeout = \"1s\"\n");
}

class ProfileTimeoutsTest
    : public ::testing::TestWithParam<test::ServerBackend> {
 protected:
  // How long a backend may take beyond `timeout` to give up: libpq counts
  // its connect_timeout in whole seconds, at least 2, and a PostgreSQL call
  // waits a second past its statement_timeout for the server's own error.
  absl::Duration Slack() const {
    return GetParam().label == "postgres" ? absl::Milliseconds(2500)
                                          : absl::Milliseconds(900);
  }
};

// Before the common options, connect_timeout went to libpq as "2s" (it wants
// whole seconds) and command_timeout was a Redis option that zk:// and
// postgres:// rejected: both profiles failed there.
TEST_P(ProfileTimeoutsTest, TimeoutsConnectOnEveryScheme) {
  const std::string uri = GetParam().uri("profile-timeouts");
  ConnectsAndLocks(uri, "connect_timeout = \"2s\"\n");
  ConnectsAndLocks(uri,
                   "connect_timeout = \"1500ms\"\ncommand_timeout = \"3s\"\n");
  ConnectsAndLocks(uri,
                   "connect_timeout = \"300ms\"\noperation_timeout = \"3s\"\n");
}

// A server that never answers the connection: Connect gives up after the
// profile's connect_timeout, well before the backend's default (2s for
// Redis, 5s for ZooKeeper and PostgreSQL).
TEST_P(ProfileTimeoutsTest, ConnectTimeoutBoundsTheConnect) {
  const std::string uri = GetParam().uri("connect-timeout");
  FaultProxy proxy;
  ASSERT_OK(proxy.Start("127.0.0.1", PortOf(uri)));
  ASSERT_OK(proxy.SetAdmission(Admission::kBlackhole));
  const absl::Duration timeout = absl::Milliseconds(600);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      ConnectWith(At(uri, proxy.port()),
                  absl::StrCat("connect_timeout = \"",
                               absl::FormatDuration(timeout), "\"\n"));
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable)
      << client.status();
  EXPECT_GE(took, timeout - absl::Milliseconds(50)) << client.status();
  EXPECT_LT(took, timeout + Slack()) << client.status();
}

// A server that stops answering after the connect: a call gives up after
// the profile's operation_timeout, well before the backend's default (2s
// for Redis, the 10s session timeout for ZooKeeper, 5s + 1s for
// PostgreSQL).
TEST_P(ProfileTimeoutsTest, OperationTimeoutBoundsACall) {
  const std::string uri = GetParam().uri("operation-timeout");
  FaultProxy proxy;
  ASSERT_OK(proxy.Start("127.0.0.1", PortOf(uri)));
  const absl::Duration timeout = absl::Milliseconds(700);
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      ConnectWith(At(uri, proxy.port()),
                  absl::StrCat("operation_timeout = \"",
                               absl::FormatDuration(timeout), "\"\n"));
  ASSERT_OK(client);
  absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
      (*client)->GetLock("stalled");
  ASSERT_OK(lock);
  // Used once, so that the call below goes out on an open connection
  // (PostgreSQL opens its pooled connections on demand).
  absl::StatusOr<Hold> first = (*lock)->TryAcquire();
  ASSERT_OK(first);
  ASSERT_OK(first->Release());
  ASSERT_OK(proxy.Partition());
  const absl::Time start = absl::Now();
  absl::StatusOr<Hold> acquired = (*lock)->TryAcquire();
  const absl::Duration took = absl::Now() - start;
  EXPECT_FALSE(acquired.ok());
  EXPECT_GE(took, timeout - absl::Milliseconds(50)) << acquired.status();
  EXPECT_LT(took, timeout + Slack()) << acquired.status();
  ASSERT_OK(proxy.Heal());
}

INSTANTIATE_TEST_SUITE_P(Backends, ProfileTimeoutsTest,
                         ::testing::ValuesIn(test::ServerBackends()),
                         test::ServerBackendName);

}  // namespace
}  // namespace dlock
