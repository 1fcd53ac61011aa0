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
#include "server_process.h"
#include "status_testing.h"
#include "tls_certificates.h"

namespace dlock::test {
namespace {

constexpr char kPassword[] = "pw-Secret-4711";

// The user of the test CA's client certificate: PostgreSQL's `cert` method
// takes its CN for the user name.
constexpr char kCertUser[] = "dlock test client";

class PostgresAuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::string> dir = MakeTempDir("dlock-pg-certs");
    ASSERT_OK(dir);
    dir_ = new std::string(*dir);
    absl::StatusOr<TlsCertificates> certs = MakeTlsCertificates(*dir);
    ASSERT_OK(certs);
    certs_ = new TlsCertificates(*certs);

    PostgresServer::Options options;
    options.ssl_cert_file = certs_->server_cert;
    options.ssl_key_file = certs_->server_key;
    options.ssl_ca_file = certs_->ca;
    const std::string cert_user = absl::StrCat("\"", kCertUser, "\"");
    options.hba = {
        // The certificate's user: TLS with a certificate the CA signed.
        absl::StrCat("hostssl all ", cert_user, " 127.0.0.1/32 cert"),
        absl::StrCat("host all ", cert_user, " 127.0.0.1/32 reject"),
        "host all pwuser 127.0.0.1/32 scram-sha-256",
    };
    absl::StatusOr<std::unique_ptr<PostgresServer>> server =
        PostgresServer::Start(options);
    ASSERT_OK(server);
    server_ = server->release();
    absl::StatusOr<std::string> roles = server_->Psql(
        absl::StrCat("CREATE ROLE pwuser LOGIN PASSWORD '", kPassword,
                     "';\n"
                     "CREATE ROLE ",
                     cert_user,
                     " LOGIN;\n"
                     "CREATE DATABASE closed;\n"
                     "REVOKE CONNECT ON DATABASE closed FROM PUBLIC;"));
    ASSERT_OK(roles);
    // The lock tables, made by their owner, who grants the others what
    // dlock needs (what `dlock setup --grant-to` does).
    for (const char* user : {"pwuser", "dlock%20test%20client"}) {
      absl::StatusOr<std::unique_ptr<LockClient>> setup =
          Connect(server_->Uri("auth", absl::StrCat("grant_to=", user)));
      ASSERT_OK(setup);
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    delete certs_;
    if (dir_ != nullptr) RemoveTree(*dir_);
    delete dir_;
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

  // sslmode=verify-full trusting `ca` (a PEM file).
  static std::string VerifyFull(const std::string& ca) {
    return absl::StrCat("sslmode=verify-full&sslrootcert=", ca);
  }

  static inline std::string* dir_ = nullptr;
  static inline TlsCertificates* certs_ = nullptr;
  static inline PostgresServer* server_ = nullptr;
};

TEST_F(PostgresAuthTest, VerifyFullConnectsByAddressAndByName) {
  for (const std::string mode : {"lease", "session"}) {
    SCOPED_TRACE(mode);
    Works(Uri("postgres@", VerifyFull(certs_->ca) + "&mode=" + mode));
    Works(Uri("postgres@", VerifyFull(certs_->ca) + "&mode=" + mode,
              "localhost"));
  }
}

TEST_F(PostgresAuthTest, VerifyFullRefusesAnotherCa) {
  const std::string message =
      Refused("verify-full, certificate of another CA",
              Uri("postgres@", VerifyFull(certs_->other_ca)),
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
              Uri("postgres@", VerifyFull(certs_->ca) + "&hostaddr=127.0.0.1",
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
  const std::string user = "dlock%20test%20client@";
  const std::string with_cert =
      absl::StrCat(VerifyFull(certs_->ca), "&sslcert=", certs_->client_cert,
                   "&sslkey=", certs_->client_key);
  Works(Uri(user, with_cert));
  const std::string message = Refused("client certificate required, none given",
                                      Uri(user, VerifyFull(certs_->ca)),
                                      absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(message, "certificate")) << message;
}

}  // namespace
}  // namespace dlock::test
