// `dlock` against Redis over TLS: what a user sees when the TLS setup is
// wrong (one line on stderr naming the server, in bounded time, without the
// password), and the warning that tls_insecure_skip_verify=true is said.
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redis_server.h"
#include "status_testing.h"
#include "test_util.h"
#include "tls_certificates.h"

namespace dlock {
namespace {

using ::dlock::test::Dlock;
using ::dlock::test::RedisServer;
using ::dlock::test::Result;
using ::dlock::test::RunProcess;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kPassword[] = "cli-tls-secret";

std::unique_ptr<RedisServer> StartOrDie(const RedisServer::Options& options) {
  absl::StatusOr<std::unique_ptr<RedisServer>> server =
      RedisServer::Start(options);
  EXPECT_OK(server);
  return server.ok() ? *std::move(server) : nullptr;
}

const test::TlsCertificates& Certs() {
  absl::StatusOr<const test::TlsCertificates*> certs =
      test::SharedTlsCertificates();
  EXPECT_OK(certs);
  static const test::TlsCertificates none;
  return certs.ok() ? **certs : none;
}

std::string Uri(const char* scheme, int port, const std::string& query) {
  return absl::StrCat(scheme, "://dlock:", kPassword, "@127.0.0.1:", port,
                      "?connect_timeout=1s", query.empty() ? "" : "&", query);
}

TEST(CliTls, EveryMisconfigurationIsOneLineNamingTheServer) {
  auto tls = StartOrDie({.tls = true});
  auto expired = StartOrDie({.tls = true, .tls_expired_certificate = true});
  auto client_auth = StartOrDie({.tls = true, .tls_auth_clients = true});
  auto plaintext = StartOrDie({});
  ASSERT_TRUE(tls && expired && client_auth && plaintext);
  const std::string ca = absl::StrCat("tls_ca=", Certs().ca);
  struct Case {
    const char* what;
    std::string uri;
    int port;
  } cases[] = {
      {"wrong CA",
       Uri("rediss", tls->port(), absl::StrCat("tls_ca=", Certs().other_ca)),
       tls->port()},
      {"expired certificate", Uri("rediss", expired->port(), ca),
       expired->port()},
      {"name mismatch",
       Uri("rediss", tls->port(),
           absl::StrCat(ca, "&tls_server_name=redis.example.com")),
       tls->port()},
      {"TLS client on a plaintext port", Uri("rediss", plaintext->port(), ca),
       plaintext->port()},
      {"plaintext client on a TLS port", Uri("redis", tls->port(), ""),
       tls->port()},
      {"no client certificate", Uri("rediss", client_auth->port(), ca),
       client_auth->port()},
  };
  for (const Case& c : cases) {
    const absl::Time start = absl::Now();
    Result r = RunProcess(Dlock({"status", "--backend", c.uri, "job"}), {},
                          absl::Seconds(20));
    const absl::Duration took = absl::Now() - start;
    std::cout << "CLI " << c.what << ": exit " << r.code << " after "
              << absl::FormatDuration(took) << ": " << r.err;
    EXPECT_GT(r.code, 0) << c.what;
    EXPECT_LT(took, absl::Seconds(10)) << c.what;
    test::ExpectOneLine(r);
    EXPECT_THAT(r.err, AllOf(HasSubstr(absl::StrCat("127.0.0.1:", c.port)),
                             Not(HasSubstr(kPassword))))
        << c.what;
  }
}

TEST(CliTls, SkippingTheCertificateCheckIsSaidOnStderr) {
  auto tls = StartOrDie({.tls = true, .tls_expired_certificate = true});
  ASSERT_NE(tls, nullptr);
  Result r = RunProcess(Dlock({"status", "--backend",
                               absl::StrCat("rediss://127.0.0.1:", tls->port(),
                                            "?tls_insecure_skip_verify=true"),
                               "job"}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("job"));
  EXPECT_THAT(r.err,
              HasSubstr("dlock: warning: tls_insecure_skip_verify=true"));
  // Checked (the default): no warning.
  Result checked = RunProcess(Dlock(
      {"status", "--backend",
       absl::StrCat("rediss://127.0.0.1:", tls->port(), "?tls_ca=", Certs().ca,
                    "&tls_insecure_skip_verify=false"),
       "job"}));
  EXPECT_THAT(checked.err, Not(HasSubstr("warning")));
}

}  // namespace
}  // namespace dlock
