// Copyright dlock authors. The etcd client over TLS (a good CA, the wrong
// CA, a name mismatch, no client certificate) and with etcd's users (a good
// password, a wrong one, a user without permission, a token etcd forgot),
// against real etcd servers set up that way.
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/dlock.h"
#include "etcd_client_test_util.h"
#include "fault_proxy.h"

namespace dlock::test {
namespace {

using etcd::WatchUpdate;

// A server that takes clients over TLS only, with a certificate.
class EtcdTlsTest : public EtcdServerSuite<EtcdTlsTest> {
 public:
  static EtcdServer::Options ServerOptions() {
    return {.tls = true, .client_cert_auth = true};
  }

 protected:
  // A client that trusts the test CA and shows the test client certificate.
  static etcd::ClientOptions Trusting() {
    etcd::ClientOptions options = ClientOptionsFor(*server_);
    options.tls = true;
    options.tls_ca = server_->certificates().ca;
    options.tls_cert = server_->certificates().client_cert;
    options.tls_key = server_->certificates().client_key;
    options.call_timeout = absl::Seconds(1);
    return options;
  }

  // The put of a client with `options`, checked to fail with Unavailable,
  // in time, naming the endpoint.
  static void ExpectRefused(const etcd::ClientOptions& options) {
    ASSERT_OK_AND_ASSIGN(auto client, etcd::Client::Create(options));
    etcdserverpb::PutRequest put;
    put.set_key(TestKey());
    const absl::Time start = absl::Now();
    absl::StatusOr<etcdserverpb::PutResponse> response = client->Put(put);
    EXPECT_LT(absl::Now() - start, absl::Seconds(3));
    EXPECT_CODE(response, kUnavailable);
    EXPECT_TRUE(
        absl::StrContains(response.status().message(), server_->Endpoints()[0]))
        << response.status();
    EXPECT_FALSE(etcd::IsOutcomeUnknown(response.status()))
        << "a TLS handshake that failed cannot have let the put through: "
        << response.status();
  }
};

TEST_F(EtcdTlsTest, ACertifiedClientTrustingTheCaWritesAndWatches) {
  ASSERT_OK_AND_ASSIGN(auto client, etcd::Client::Create(Trusting()));
  const std::string key = TestKey();
  WatchRecorder recorder;
  auto watch = client->StartWatch({.key = key}, recorder.Callback());
  ASSERT_TRUE(recorder.WaitStarted());
  MustPut(*client, key, "over TLS");
  EXPECT_EQ(Get(*client, key), "over TLS");
  EXPECT_TRUE(recorder.WaitEvents(1));
}

TEST_F(EtcdTlsTest, AMemberSlowToShakeHandsIsStillReached) {
  // Every reply 700 ms late: the TLS handshake takes seconds, far longer
  // than the client's reconnect backoff, which must not cut it short.
  FaultProxy slow;
  ASSERT_OK(slow.Start("127.0.0.1", server_->client_port(0)));
  slow.SetFault(Direction::kReplies, Fault::Delay(absl::Milliseconds(700)));
  etcd::ClientOptions options = Trusting();
  options.endpoints = {absl::StrCat("localhost:", slow.port())};
  options.connect_timeout = absl::Seconds(10);
  options.call_timeout = absl::Seconds(15);
  ASSERT_OK_AND_ASSIGN(auto client, etcd::Client::Create(options));
  EXPECT_EQ(Get(*client, TestKey()), std::nullopt);
}

TEST_F(EtcdTlsTest, TrustingAnotherCaIsRefused) {
  etcd::ClientOptions options = Trusting();
  options.tls_ca = server_->certificates().other_ca;
  ExpectRefused(options);
}

TEST_F(EtcdTlsTest, ACertificateForAnotherNameIsRefused) {
  etcd::ClientOptions options = Trusting();
  options.tls_server_name = "not-this-server.example";
  ExpectRefused(options);
}

TEST_F(EtcdTlsTest, AClientWithoutCertificateIsRefused) {
  etcd::ClientOptions options = Trusting();
  options.tls_cert.clear();
  options.tls_key.clear();
  ExpectRefused(options);
}

TEST_F(EtcdTlsTest, APlaintextClientIsRefused) {
  etcd::ClientOptions options = ClientOptionsFor(*server_);
  options.call_timeout = absl::Seconds(1);
  ExpectRefused(options);
}

TEST_F(EtcdTlsTest, AnUnreadableCaFileIsNamed) {
  etcd::ClientOptions options = Trusting();
  options.tls_ca = "/nonexistent/ca.pem";
  absl::StatusOr<std::unique_ptr<etcd::Client>> client =
      etcd::Client::Create(options);
  EXPECT_CODE(client, kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(client.status().message(), "tls_ca"))
      << client.status();
  EXPECT_TRUE(absl::StrContains(client.status().message(), options.tls_ca))
      << client.status();
}

// Through dlock::Connect: an etcd URI takes the tls_* options of rediss://
// (dlock/backend/options.h), all but tls_insecure_skip_verify (gRPC always
// checks the server).
TEST_F(EtcdTlsTest, AnEtcdUriTakesTheTlsOptionsOfRediss) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LockClient> client,
                       Connect(server_->Uri("tls")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DistributedLock> lock,
                       client->GetLock("over-tls"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->TryAcquire());
  EXPECT_OK(hold.Release());

  const std::string uri = absl::StrCat("etcd://", server_->Hosts(), "?");
  const std::string ca =
      absl::StrCat("tls_ca=", server_->certificates().ca, "&");
  const struct {
    std::string uri;
    const char* says;
  } refused[] = {
      {absl::StrCat(uri, ca, "tls_cert=", server_->certificates().client_cert),
       "tls_cert and tls_key go together"},
      {absl::StrCat(uri, ca, "tls_insecure_skip_verify=true"),
       "'tls_insecure_skip_verify'"},
      {absl::StrCat(uri, "tls_server_name="), "tls_server_name is empty"},
  };
  for (const auto& r : refused) {
    absl::StatusOr<std::unique_ptr<LockClient>> bad = Connect(r.uri);
    EXPECT_CODE(bad, kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(bad.status().message(), r.says))
        << r.uri << ": " << bad.status();
  }
}

// A server with authentication on, whose tokens last a second.
class EtcdAuthTest : public EtcdServerSuite<EtcdAuthTest> {
 public:
  static EtcdServer::Options ServerOptions() {
    return {.auth = true, .auth_token_ttl_seconds = 1};
  }

 protected:
  static std::unique_ptr<etcd::Client> As(const std::string& user,
                                          const std::string& password) {
    etcd::ClientOptions options = ClientOptionsFor(*server_);
    options.user = user;
    options.password = password;
    options.call_timeout = absl::Seconds(3);
    absl::StatusOr<std::unique_ptr<etcd::Client>> client =
        etcd::Client::Create(options);
    EXPECT_OK(client);
    return client.ok() ? *std::move(client) : nullptr;
  }
  static std::unique_ptr<etcd::Client> AsUser() {
    return As(EtcdServer::kUser, server_->password(EtcdServer::kUser));
  }
  static absl::Status PutAs(etcd::Client& client, const std::string& key) {
    etcdserverpb::PutRequest put;
    put.set_key(key);
    put.set_value("v");
    return client.Put(put).status();
  }
};

TEST_F(EtcdAuthTest, TheUserWritesUnderItsPrefixAndNowhereElse) {
  auto client = AsUser();
  ASSERT_NE(client, nullptr);
  EXPECT_OK(PutAs(*client, TestKey()));
  EXPECT_EQ(Get(*client, TestKey()), "v");
  const absl::Status outside = PutAs(*client, "/elsewhere");
  EXPECT_CODE(outside, kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(outside.message(), server_->Endpoints()[0]))
      << outside;
}

TEST_F(EtcdAuthTest, AWrongPasswordIsUnauthenticatedAndNeverShown) {
  const std::string wrong = "wrong-" + server_->password(EtcdServer::kUser);
  auto client = As(EtcdServer::kUser, wrong);
  ASSERT_NE(client, nullptr);
  const absl::Status status = PutAs(*client, TestKey());
  EXPECT_CODE(status, kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(status.message(), EtcdServer::kUser)) << status;
  EXPECT_FALSE(absl::StrContains(status.message(), wrong)) << status;
}

TEST_F(EtcdAuthTest, NoUserIsUnauthenticated) {
  etcd::ClientOptions options = ClientOptionsFor(*server_);
  ASSERT_OK_AND_ASSIGN(auto client, etcd::Client::Create(options));
  EXPECT_CODE(PutAs(*client, TestKey()), kUnauthenticated);
}

TEST_F(EtcdAuthTest, AUserWithoutPermissionIsDeniedCallsAndWatches) {
  auto client =
      As(EtcdServer::kOutsider, server_->password(EtcdServer::kOutsider));
  ASSERT_NE(client, nullptr);
  EXPECT_CODE(PutAs(*client, TestKey()), kPermissionDenied);
  etcdserverpb::RangeRequest range;
  range.set_key(TestKey());
  EXPECT_CODE(client->Range(range), kPermissionDenied);

  WatchRecorder recorder;
  auto watch = client->StartWatch({.key = TestKey()}, recorder.Callback());
  ASSERT_TRUE(recorder.WaitFor([](const std::vector<WatchUpdate>& updates) {
    return !updates.empty() && updates.back().kind == WatchUpdate::Kind::kEnded;
  })) << "the refused watch did not end";
  EXPECT_CODE(recorder.updates().back().status, kPermissionDenied);
}

TEST_F(EtcdAuthTest, ATokenEtcdForgotIsRenewedForCallsStreamsAndLeases) {
  // Three clients, each with a token of its own for one path.
  auto for_call = AsUser();
  auto for_watch = AsUser();
  auto for_lease = AsUser();
  ASSERT_TRUE(for_call && for_watch && for_lease);
  ASSERT_OK(PutAs(*for_call, TestKey()));
  ASSERT_OK(PutAs(*for_watch, TestKey()));
  ASSERT_OK_AND_ASSIGN(auto lease, for_lease->LeaseGrant(absl::Seconds(5)));
  // Idle past the tokens' TTL: etcd forgets them ("invalid auth token").
  absl::SleepFor(absl::Milliseconds(2500));

  EXPECT_OK(PutAs(*for_call, TestKey()));
  WatchRecorder recorder;
  auto watch = for_watch->StartWatch({.key = TestKey()}, recorder.Callback());
  ASSERT_TRUE(recorder.WaitStarted());
  EXPECT_EQ(recorder.updates()[0].kind, WatchUpdate::Kind::kStarted);
  EXPECT_OK(for_lease->leases().KeepAliveOnce(
      lease.id(), etcd::MonotonicNow() + absl::Seconds(5)));
}

TEST_F(EtcdAuthTest, AWatchMovesOnFromAMemberThatNeverAnswers) {
  // The first endpoint accepts connections and never answers.
  FaultProxy silent;
  ASSERT_OK(silent.Start("127.0.0.1", server_->client_port(0)));
  for (Direction d : kBothDirections) silent.SetFault(d, Fault::Stall());
  etcd::ClientOptions options = ClientOptionsFor(*server_);
  options.endpoints.insert(options.endpoints.begin(),
                           absl::StrCat("127.0.0.1:", silent.port()));
  options.user = EtcdServer::kUser;
  options.password = server_->password(EtcdServer::kUser);
  ASSERT_OK_AND_ASSIGN(auto client, etcd::Client::Create(options));

  // A watch is a stream without a deadline; neither connecting nor getting
  // its token may wait for the silent member forever.
  WatchRecorder recorder;
  auto watch = client->StartWatch({.key = TestKey()}, recorder.Callback());
  ASSERT_TRUE(recorder.WaitStarted())
      << "the watch stayed on the silent member";
  MustPut(*client, TestKey(), "v");
  EXPECT_TRUE(recorder.WaitEvents(1));
}

}  // namespace
}  // namespace dlock::test
