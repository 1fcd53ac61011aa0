// Copyright dlock authors. Connecting where production does (issue 19): TLS
// with sslmode=verify-full against a CA the test makes, password and
// certificate authentication. Each refusal has its own status code, so that
// a retry loop can tell a wrong password from a server that is down:
// Unauthenticated for a refused user, password or certificate (SQLSTATE
// class 28, or TLS verification), PermissionDenied for a missing database
// or one the user may not connect to (3D000, 42501). Each message carries
// libpq's reason and never the password; each case prints it as a user
// sees it ("AUTH <case>: ...").
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "postgres_server.h"
#include "status_testing.h"
#include "test_certificates.h"

namespace dlock::testing {
namespace {

constexpr char kPassword[] = "pw-Secret-4711";

class PostgresAuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<TestCertificates>> ca =
        TestCertificates::Start();
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = ca->release();
    absl::StatusOr<std::unique_ptr<TestCertificates>> other =
        TestCertificates::Start("another CA");
    ASSERT_TRUE(other.ok()) << other.status();
    other_ca_ = other->release();
    absl::StatusOr<TestCertificates::Issued> server_cert =
        ca_->Issue("server", {"localhost", "127.0.0.1"});
    ASSERT_TRUE(server_cert.ok()) << server_cert.status();
    absl::StatusOr<TestCertificates::Issued> client_cert =
        ca_->Issue("certuser", {"certuser"});
    ASSERT_TRUE(client_cert.ok()) << client_cert.status();
    client_cert_ = new TestCertificates::Issued(*client_cert);

    PostgresServer::Options options;
    options.ssl_cert_file = server_cert->cert_file;
    options.ssl_key_file = server_cert->key_file;
    options.ssl_ca_file = ca_->ca_file();
    options.hba = {
        // certuser: TLS with a client certificate the CA signed, or nothing.
        "hostssl all certuser 127.0.0.1/32 cert",
        "host all certuser 127.0.0.1/32 reject",
        "host all pwuser 127.0.0.1/32 scram-sha-256",
    };
    absl::StatusOr<std::unique_ptr<PostgresServer>> server =
        PostgresServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    absl::StatusOr<std::string> roles = server_->Psql(
        absl::StrCat("CREATE ROLE pwuser LOGIN PASSWORD '", kPassword,
                     "';\n"
                     "CREATE ROLE certuser LOGIN;\n"
                     "CREATE DATABASE closed;\n"
                     "REVOKE CONNECT ON DATABASE closed FROM PUBLIC;"));
    ASSERT_TRUE(roles.ok()) << roles.status();
    // The lock tables, made by their owner, who grants the others what
    // dlock needs (what `dlock setup --grant-to` does).
    for (const char* user : {"pwuser", "certuser"}) {
      absl::StatusOr<std::unique_ptr<LockClient>> setup =
          Connect(server_->Uri("auth", absl::StrCat("grant_to=", user)));
      ASSERT_TRUE(setup.ok()) << setup.status();
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    delete client_cert_;
    delete other_ca_;
    delete ca_;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  // postgres://<userinfo>127.0.0.1:<port>/<db>?<query>
  std::string Uri(const std::string& userinfo, const std::string& query,
                  const std::string& host = "127.0.0.1",
                  const std::string& db = "postgres") const {
    return absl::StrCat("postgres://", userinfo, host, ":", server_->port(),
                        "/", db, "?namespace=auth&", query);
  }

  // Connects to `uri`, expecting `code`; returns the message and prints it.
  std::string Refused(const std::string& what, const std::string& uri,
                      absl::StatusCode code) {
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
    EXPECT_EQ(client.status().code(), code) << what << ": " << client.status();
    const std::string message(client.status().message());
    EXPECT_FALSE(absl::StrContains(message, kPassword)) << message;
    std::cout << "AUTH " << what << ": "
              << absl::StatusCodeToString(client.status().code()) << ": "
              << message << std::endl;
    return message;
  }

  // Connects to `uri` and takes and releases a lock through it.
  void Works(const std::string& uri) {
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
    ASSERT_OK(client);
    ASSERT_OK_AND_ASSIGN(auto lock, (*client)->GetLock("reachable"));
    ASSERT_OK_AND_ASSIGN(Hold hold, lock->TryAcquire());
    EXPECT_OK(hold.Release());
  }

  std::string VerifyFull(const TestCertificates& ca) const {
    return absl::StrCat("sslmode=verify-full&sslrootcert=", ca.ca_file());
  }

  static inline TestCertificates* ca_ = nullptr;
  static inline TestCertificates* other_ca_ = nullptr;
  static inline TestCertificates::Issued* client_cert_ = nullptr;
  static inline PostgresServer* server_ = nullptr;
};

TEST_F(PostgresAuthTest, VerifyFullConnectsByAddressAndByName) {
  for (const std::string mode : {"lease", "session"}) {
    SCOPED_TRACE(mode);
    Works(Uri("postgres@", VerifyFull(*ca_) + "&mode=" + mode));
    Works(Uri("postgres@", VerifyFull(*ca_) + "&mode=" + mode, "localhost"));
  }
}

TEST_F(PostgresAuthTest, VerifyFullRefusesAnotherCa) {
  const std::string message = Refused("verify-full, certificate of another CA",
                                      Uri("postgres@", VerifyFull(*other_ca_)),
                                      absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(message, "certificate verify failed"))
      << message;
  EXPECT_TRUE(absl::StrContains(message, absl::StrCat(server_->port())))
      << message;
}

TEST_F(PostgresAuthTest, VerifyFullRefusesAnotherHostName) {
  // Dialled at 127.0.0.1, checked as wrong.example: the certificate is for
  // localhost and 127.0.0.1 only.
  const std::string message =
      Refused("verify-full, host name not in the certificate",
              Uri("postgres@", VerifyFull(*ca_) + "&hostaddr=127.0.0.1",
                  "wrong.example"),
              absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(message, "does not match host name"))
      << message;
}

TEST_F(PostgresAuthTest, WrongPasswordIsUnauthenticated) {
  Works(Uri(absl::StrCat("pwuser:", kPassword, "@"), "sslmode=disable"));
  const std::string message = Refused(
      "wrong password",
      Uri(absl::StrCat("pwuser:", kPassword, "-wrong@"), "sslmode=disable"),
      absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(message, "password authentication failed"))
      << message;
  EXPECT_TRUE(absl::StrContains(message, "SQLSTATE 28P01")) << message;
}

TEST_F(PostgresAuthTest, MissingPasswordIsUnauthenticated) {
  const std::string message =
      Refused("no password given", Uri("pwuser@", "sslmode=disable"),
              absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(message, "password_env")) << message;
}

TEST_F(PostgresAuthTest, MissingRoleIsUnauthenticated) {
  const std::string message =
      Refused("missing role", Uri("no_such_role@", "sslmode=disable"),
              absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(message, "SQLSTATE 28000")) << message;
}

TEST_F(PostgresAuthTest, MissingDatabaseIsPermissionDenied) {
  const std::string message =
      Refused("missing database",
              Uri("postgres@", "sslmode=disable", "127.0.0.1", "no_such_db"),
              absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(message, "SQLSTATE 3D000")) << message;
}

TEST_F(PostgresAuthTest, DatabaseWithoutConnectIsPermissionDenied) {
  const std::string message =
      Refused("database without CONNECT for the user",
              Uri("pwuser:" + std::string(kPassword) + "@", "sslmode=disable",
                  "127.0.0.1", "closed"),
              absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(message, "SQLSTATE 42501")) << message;
}

TEST_F(PostgresAuthTest, ClientCertificateRequired) {
  const std::string with_cert =
      absl::StrCat(VerifyFull(*ca_), "&sslcert=", client_cert_->cert_file,
                   "&sslkey=", client_cert_->key_file);
  Works(Uri("certuser@", with_cert));
  const std::string message = Refused("client certificate required, none given",
                                      Uri("certuser@", VerifyFull(*ca_)),
                                      absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(message, "certificate")) << message;
}

}  // namespace
}  // namespace dlock::testing
