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
#include "test_certificates.h"
#include "test_util.h"

namespace dlock {
namespace {

using ::dlock::testing::Dlock;
using ::dlock::testing::RedisServer;
using ::dlock::testing::Result;
using ::dlock::testing::RunProcess;
using ::testing::HasSubstr;
using ::testing::Not;

std::unique_ptr<RedisServer> StartOrDie(const RedisServer::Options& options) {
  absl::StatusOr<std::unique_ptr<RedisServer>> server =
      RedisServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

const testing::TestCertificates& Certs() {
  absl::StatusOr<const testing::TestCertificates*> certs =
      testing::SharedTestCertificates();
  EXPECT_TRUE(certs.ok()) << certs.status();
  static const testing::TestCertificates none;
  return certs.ok() ? **certs : none;
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
