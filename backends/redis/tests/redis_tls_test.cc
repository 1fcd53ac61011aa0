// rediss://: TLS to a redis-server that takes only TLS on its port, with
// certificates the harness makes (integration/tls_certificates.h). What must
// work (the server's certificate and name checked, an IP address included; a
// client certificate; replies that come a few bytes at a time), and every way
// it can be set up wrong, each refused in bounded time with a message that
// names the server, says what to fix, and never shows the password.
#include "redis_tls.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "fault_proxy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redis_connection.h"
#include "redis_mux.h"
#include "redis_server.h"
#include "status_testing.h"
#include "tls_certificates.h"

namespace dlock {
namespace {

using ::dlock::test::RedisServer;
using ::dlock::test::TlsCertificates;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kPassword[] = "hunter2-tls-secret";
// Short, so that a case that waits out its timeout shows it quickly.
constexpr absl::Duration kConnectTimeout = absl::Seconds(1);
// Every refusal comes within the connect timeout, with room for a loaded
// machine; a hang would take far longer.
const absl::Duration kBound = kConnectTimeout + absl::Seconds(2);

class RedisTls : public ::testing::Test {
 protected:
  enum Kind { kTls, kExpired, kClientAuth, kPlaintext };

  void SetUp() override {
    absl::StatusOr<const TlsCertificates*> certs =
        test::SharedTlsCertificates();
    ASSERT_OK(certs);
    certs_ = *certs;
  }

  // The server of `kind`, started on first use: under ctest each case runs
  // in a process of its own, which starts only the servers it uses. One
  // that cannot start fails the case.
  static RedisServer& Started(Kind kind) {
    static const RedisServer::Options kOptions[] = {
        {.tls = true},  // tls-auth-clients no
        {.tls = true, .tls_expired_certificate = true},
        {.tls = true, .tls_auth_clients = true},
        {},
    };
    static std::unique_ptr<RedisServer> servers[4];
    std::unique_ptr<RedisServer>& server = servers[kind];
    if (server == nullptr) {
      absl::StatusOr<std::unique_ptr<RedisServer>> started =
          RedisServer::Start(kOptions[kind]);
      if (!started.ok()) {
        throw std::runtime_error(started.status().ToString());
      }
      server = *std::move(started);
    }
    return *server;
  }

  // scheme://user:password@host:port?<query>, short timeouts.
  static std::string Uri(const char* scheme, const std::string& host, int port,
                         const std::string& query) {
    return absl::StrCat(
        scheme, "://dlock:", kPassword, "@", host, ":", port,
        "?connect_timeout=", absl::FormatDuration(kConnectTimeout),
        "&operation_timeout=1s", query.empty() ? "" : "&", query);
  }
  std::string TrustTestCa() const {
    return absl::StrCat("tls_ca=", certs_->ca);
  }

  // Connect(uri) fails with `code` within kBound, never showing the
  // password; returns its message, printed for the record.
  static std::string Refusal(const std::string& what, const std::string& uri,
                             absl::StatusCode code) {
    const absl::Time start = absl::Now();
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(client.status().code(), code) << what << ": " << client.status();
    EXPECT_LT(took, kBound) << what;
    const std::string message(client.status().message());
    EXPECT_THAT(message, Not(HasSubstr(kPassword))) << what;
    std::cout << "REFUSED " << what << " (" << absl::FormatDuration(took)
              << "): " << message << std::endl;
    return message;
  }

  const TlsCertificates* certs_ = nullptr;
};

void LockOnce(LockClient& client) {
  ASSERT_OK_AND_ASSIGN(auto lock, client.GetLock("tls"));
  ASSERT_OK_AND_ASSIGN(Hold hold, lock->Acquire({.wait = absl::Seconds(5)}));
  EXPECT_OK(hold.Release());
}

TEST_F(RedisTls, ChecksTheCertificateAgainstTheAddressOrTheName) {
  // 127.0.0.1 is matched against the certificate's IP addresses, localhost
  // against its DNS names.
  for (const char* host : {"127.0.0.1", "localhost"}) {
    ASSERT_OK_AND_ASSIGN(
        auto client,
        Connect(absl::StrCat("rediss://", host, ":", Started(kTls).port(), "?",
                             TrustTestCa())));
    LockOnce(*client);
  }
  // The name checked can be another one the certificate carries.
  ASSERT_OK_AND_ASSIGN(
      auto named,
      Connect(absl::StrCat("rediss://127.0.0.1:", Started(kTls).port(), "?",
                           TrustTestCa(), "&tls_server_name=localhost")));
  LockOnce(*named);
}

TEST_F(RedisTls, ClientCertificateForAServerThatAsksForOne) {
  ASSERT_OK_AND_ASSIGN(auto client,
                       Connect(Started(kClientAuth).Uri("client_cert")));
  LockOnce(*client);
}

TEST_F(RedisTls, WrongCaIsRefused) {
  const std::string message =
      Refusal("wrong CA",
              Uri("rediss", "127.0.0.1", Started(kTls).port(),
                  absl::StrCat("tls_ca=", certs_->other_ca)),
              absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(message,
              AllOf(HasSubstr(absl::StrCat("127.0.0.1:", Started(kTls).port())),
                    HasSubstr("certificate"), HasSubstr("tls_ca")));
}

TEST_F(RedisTls, WithoutACaTheSystemStoreDecidesAndKnowsNoTestCa) {
  const std::string message = Refusal(
      "system CA store", Uri("rediss", "127.0.0.1", Started(kTls).port(), ""),
      absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(message, HasSubstr("system"));
}

TEST_F(RedisTls, ExpiredCertificateIsRefused) {
  const std::string message = Refusal(
      "expired certificate",
      Uri("rediss", "127.0.0.1", Started(kExpired).port(), TrustTestCa()),
      absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(
      message,
      AllOf(HasSubstr(absl::StrCat("127.0.0.1:", Started(kExpired).port())),
            HasSubstr("expired")));
}

TEST_F(RedisTls, NameOrAddressMismatchIsRefused) {
  const std::string name = Refusal(
      "name mismatch",
      Uri("rediss", "127.0.0.1", Started(kTls).port(),
          absl::StrCat(TrustTestCa(), "&tls_server_name=redis.example.com")),
      absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(
      name,
      AllOf(HasSubstr(absl::StrCat("127.0.0.1:", Started(kTls).port())),
            HasSubstr("redis.example.com"), HasSubstr("tls_server_name")));
  // An address is checked too: the certificate names 127.0.0.1 only.
  const std::string address =
      Refusal("address mismatch",
              Uri("rediss", "127.0.0.1", Started(kTls).port(),
                  absl::StrCat(TrustTestCa(), "&tls_server_name=127.0.0.2")),
              absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(address, HasSubstr("IP address mismatch"));
}

TEST_F(RedisTls, TlsClientOnAPlaintextPort) {
  const std::string message = Refusal(
      "TLS client on a plaintext port",
      Uri("rediss", "127.0.0.1", Started(kPlaintext).port(), TrustTestCa()),
      absl::StatusCode::kUnavailable);
  EXPECT_THAT(
      message,
      AllOf(HasSubstr(absl::StrCat("127.0.0.1:", Started(kPlaintext).port())),
            HasSubstr("redis://")));
}

TEST_F(RedisTls, PlaintextClientOnATlsPort) {
  const std::string message =
      Refusal("plaintext client on a TLS port",
              Uri("redis", "127.0.0.1", Started(kTls).port(), ""),
              absl::StatusCode::kUnavailable);
  EXPECT_THAT(message,
              AllOf(HasSubstr(absl::StrCat("127.0.0.1:", Started(kTls).port())),
                    HasSubstr("rediss://")));
}

TEST_F(RedisTls, ServerThatAsksForAClientCertificateAndGetsNone) {
  const std::string message = Refusal(
      "no client certificate",
      Uri("rediss", "127.0.0.1", Started(kClientAuth).port(), TrustTestCa()),
      absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(
      message,
      AllOf(HasSubstr(absl::StrCat("127.0.0.1:", Started(kClientAuth).port())),
            HasSubstr("tls_cert")));
}

TEST_F(RedisTls, InsecureSkipVerifyTakesAnyCertificate) {
  ASSERT_OK_AND_ASSIGN(
      auto client,
      Connect(absl::StrCat("rediss://127.0.0.1:", Started(kExpired).port(),
                           "?tls_ca=", certs_->other_ca,
                           "&tls_insecure_skip_verify=true")));
  LockOnce(*client);
}

TEST_F(RedisTls, UriErrorsSayWhatToFix) {
  const std::string port = absl::StrCat(Started(kTls).port());
  struct Case {
    std::string uri;
    const char* says;
  } cases[] = {
      {absl::StrCat("redis://127.0.0.1:", port, "?", TrustTestCa()),
       "rediss://"},
      {absl::StrCat("redlock://a:1,b:2,c:3?tls_server_name=x"), "redlocks://"},
      {absl::StrCat("rediss://127.0.0.1:", port, "?tls_ca=/nonexistent/ca.pem"),
       "/nonexistent/ca.pem"},
      {absl::StrCat("rediss://127.0.0.1:", port,
                    "?tls_cert=", certs_->client_cert),
       "tls_key"},
      {absl::StrCat("rediss://127.0.0.1:", port, "?tls_cert=",
                    certs_->client_cert, "&tls_key=", certs_->server_key),
       "tls_key"},
      {absl::StrCat("rediss://127.0.0.1:", port,
                    "?tls_insecure_skip_verify=yes"),
       "true or false"},
      {absl::StrCat("rediss://127.0.0.1:", port, "?tls_cafile=x"), "tls_ca"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(c.uri);
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument)
        << c.uri << ": " << client.status();
    EXPECT_THAT(client.status().message(), HasSubstr(c.says)) << c.uri;
  }
}

// A reply split across many TLS reads (records that arrive a few bytes at a
// time) is read whole: the proxy forwards the server's bytes seven at a time.
TEST_F(RedisTls, RecordsThatArriveInPieces) {
  test::FaultProxy proxy;
  ASSERT_OK(proxy.Start("127.0.0.1", Started(kTls).port()));
  proxy.SetFault(test::Direction::kReplies,
                 test::Fault::Trickle(7, absl::Microseconds(300)));
  ASSERT_OK_AND_ASSIGN(
      auto client,
      Connect(absl::StrCat("rediss://127.0.0.1:", proxy.port(), "?",
                           TrustTestCa(), "&operation_timeout=10s")));
  LockOnce(*client);
  EXPECT_GT(proxy.stats().replies.forwarded, 1000u);
}

// The dial, TLS handshake included, stops at once when asked to: a thread
// being stopped does not wait out connect_timeout against a server that
// accepted the connection and never answers the handshake.
TEST(RedisTlsTransport, HandshakeStopsWhenCancelled) {
  absl::StatusOr<const TlsCertificates*> certs = test::SharedTlsCertificates();
  ASSERT_OK(certs);
  // Listens, never accepts: the kernel completes the TCP handshake, and
  // nobody answers the client's hello.
  const int silent = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&address), size), 0);
  ASSERT_EQ(listen(silent, 4), 0);
  ASSERT_EQ(getsockname(silent, reinterpret_cast<sockaddr*>(&address), &size),
            0);
  ASSERT_OK_AND_ASSIGN(auto context,
                       redis::TlsContext::Create({.ca_file = (*certs)->ca}));
  const int cancel_fd = eventfd(0, EFD_CLOEXEC);
  std::thread canceller([cancel_fd] {
    absl::SleepFor(absl::Milliseconds(200));
    uint64_t one = 1;
    EXPECT_EQ(write(cancel_fd, &one, sizeof(one)), 8);
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<redis::Stream>> stream =
      redis::Dial("127.0.0.1", ntohs(address.sin_port), {.context = context},
                  "silent", redis::DeadlineIn(absl::Seconds(30)), cancel_fd);
  const absl::Duration took = absl::Now() - start;
  canceller.join();
  close(cancel_fd);
  close(silent);
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kCancelled)
      << stream.status();
  EXPECT_LT(took, absl::Seconds(5));
}

// OpenSSL's own socket writes raise SIGPIPE on a connection the server
// reset, which kills the process: the transport's do not.
TEST(RedisTlsTransportDeathTest,
     WritingToAClosedConnectionDoesNotKillTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        absl::StatusOr<std::unique_ptr<RedisServer>> server =
            RedisServer::Start({.tls = true});
        absl::StatusOr<const TlsCertificates*> certs =
            test::SharedTlsCertificates();
        if (!server.ok() || !certs.ok()) _exit(2);
        absl::StatusOr<std::shared_ptr<const redis::TlsContext>> context =
            redis::TlsContext::Create({.ca_file = (*certs)->ca});
        if (!context.ok()) _exit(2);
        redis::ConnectionConfig config;
        config.host = "127.0.0.1";
        config.port = (*server)->port();
        config.endpoint = "tls server";
        config.tls.context = *context;
        absl::StatusOr<std::unique_ptr<redis::Connection>> conn =
            redis::Connection::Open(config);
        if (!conn.ok()) _exit(2);
        redis::MuxConnection mux(*std::move(conn));
        (*server)->Kill();
        absl::SleepFor(absl::Milliseconds(100));
        const std::string big(8 << 20, 'x');
        absl::StatusOr<std::vector<redis::Reply>> replies =
            mux.Call({redis::FormatCommand({"ECHO", big})});
        _exit(!replies.ok() &&
                      replies.status().code() == absl::StatusCode::kUnavailable
                  ? 0
                  : 3);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace dlock
