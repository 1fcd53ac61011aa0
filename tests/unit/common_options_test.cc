// Copyright dlock authors. The URI options every backend takes
// (dlock/backend/options.h): parsed once by the core, with one syntax and
// one message whatever the scheme, and handed to the backend typed.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/options.h"
#include "dlock/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

using ::testing::HasSubstr;

// A scheme that keeps what the core hands its factory, and connects nowhere.
CommonBackendOptions captured;

absl::StatusOr<std::unique_ptr<Backend>> Capture(const BackendConfig& config) {
  captured = config.common;
  if (absl::Status s = config.params.RejectUnknown("capture"); !s.ok()) {
    return s;
  }
  return absl::UnavailableError("capture:// connects nowhere");
}

const bool kCaptureRegistered = RegisterBackend("capture", &Capture);

CommonBackendOptions CommonOf(const std::string& uri) {
  captured = {};
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable)
      << uri << ": " << client.status();
  return captured;
}

TEST(CommonOptions, ReachTheBackendTyped) {
  ASSERT_TRUE(kCaptureRegistered);
  CommonBackendOptions common =
      CommonOf("capture://h?connect_timeout=250ms&operation_timeout=1.5s");
  EXPECT_EQ(common.connect_timeout, absl::Milliseconds(250));
  EXPECT_EQ(common.operation_timeout, absl::Milliseconds(1500));

  common = CommonOf("capture://h");
  EXPECT_EQ(common.connect_timeout, std::nullopt);
  EXPECT_EQ(common.operation_timeout, std::nullopt);

  // libpq's form of connect_timeout, whole seconds, works on every scheme.
  common = CommonOf("capture://h?connect_timeout=3&operation_timeout=2m");
  EXPECT_EQ(common.connect_timeout, absl::Seconds(3));
  EXPECT_EQ(common.operation_timeout, absl::Minutes(2));
}

// The same bad value gets the same message on every scheme, before any
// backend sees it (the hosts are unreachable: nothing else could fail fast).
TEST(CommonOptions, BadValuesAreOneInvalidArgumentOnEveryScheme) {
  const std::vector<std::string> bad = {
      "connect_timeout=0",       "connect_timeout=-1s",
      "connect_timeout=soon",    "connect_timeout=2h",
      "connect_timeout=1.5",     "connect_timeout=",
      "operation_timeout=500",   "operation_timeout=inf",
      "operation_timeout=0.5h1", "operation_timeout=100us"};
  for (const std::string& option : bad) {
    const std::string key = option.substr(0, option.find('='));
    std::optional<std::string> first_message;
    for (const std::string& scheme : RegisteredSchemes()) {
      const std::string uri = absl::StrCat(
          scheme, "://", scheme == "memory" ? "x" : "127.0.0.1:1", "?", option);
      absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
      ASSERT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument)
          << uri << ": " << client.status();
      const std::string message(client.status().message());
      EXPECT_THAT(message, HasSubstr(absl::StrCat("'", key, "'"))) << uri;
      EXPECT_THAT(message, HasSubstr("like 500ms, 2s or 1m")) << uri;
      if (!first_message.has_value()) first_message = message;
      EXPECT_EQ(message, *first_message) << uri;
    }
  }
}

// Names a backend used before the common options still work there; both
// names with different values are InvalidArgument naming both.
TEST(CommonOptions, OlderNamesAreAliases) {
  struct Alias {
    std::string scheme;
    std::string alias;
  };
  std::vector<Alias> aliases;
  for (const std::string& scheme : RegisteredSchemes()) {
    if (scheme == "redis") aliases.push_back({scheme, "command_timeout"});
    if (scheme == "postgres") aliases.push_back({scheme, "statement_timeout"});
  }
  for (const Alias& a : aliases) {
    const std::string base = absl::StrCat(a.scheme, "://127.0.0.1:1/0?");
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        Connect(absl::StrCat(base, a.alias, "=2s"));
    EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable)
        << a.alias << ": " << client.status();
    client = Connect(absl::StrCat(base, a.alias, "=2s&operation_timeout=2s"));
    EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable)
        << a.alias << ": " << client.status();

    client = Connect(absl::StrCat(base, a.alias, "=2s&operation_timeout=3s"));
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument)
        << a.alias;
    EXPECT_THAT(client.status().message(),
                HasSubstr(absl::StrCat("'operation_timeout' (3s) and '",
                                       a.alias, "' (2s)")));
    // The alias has the syntax of the option it stands for.
    client = Connect(absl::StrCat(base, a.alias, "=2"));
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument)
        << a.alias;
    EXPECT_THAT(client.status().message(),
                HasSubstr(absl::StrCat("'", a.alias, "'")));
  }
}

// A scheme's list of known options ends with what every scheme takes.
TEST(CommonOptions, UnknownOptionMessagesListThem) {
  for (const std::string& scheme : RegisteredSchemes()) {
    const std::string uri = absl::StrCat(
        scheme, "://", scheme == "memory" ? "x" : "127.0.0.1:1", "?tiemout=1s");
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
    ASSERT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument)
        << uri << ": " << client.status();
    EXPECT_THAT(client.status().message(), HasSubstr("'tiemout'"));
    EXPECT_THAT(client.status().message(), HasSubstr(kCommonOptionNames))
        << uri;
  }
}

// memory:// has nothing to time out, but takes the options like every
// scheme, so that one profile works anywhere.
TEST(CommonOptions, MemoryTakesThem) {
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect("memory://common?connect_timeout=1s&operation_timeout=2s");
  ASSERT_OK(client);
}

// The tls_* options of every TLS scheme (rediss://, etcds://): one set of
// names and rules, taken in the core.
TEST(TlsOptions, TakenWithOneSetOfRules) {
  auto take = [](const std::string& query, bool skip_verify) {
    absl::StatusOr<Uri> uri = ParseUri(absl::StrCat("x://h?", query));
    EXPECT_OK(uri);
    UriParams params(*uri);
    absl::StatusOr<TlsUriOptions> tls = TakeTlsOptions(params, skip_verify);
    if (tls.ok()) {
      EXPECT_OK(params.RejectUnknown("x")) << query;  // every one taken
    }
    return tls;
  };
  ASSERT_OK_AND_ASSIGN(
      TlsUriOptions all,
      take("tls_server_name=db&tls_ca=ca.pem&tls_cert=c.pem&tls_key=k.pem&"
           "tls_insecure_skip_verify=true",
           true));
  EXPECT_EQ(all.ca_file, "ca.pem");
  EXPECT_EQ(all.cert_file, "c.pem");
  EXPECT_EQ(all.key_file, "k.pem");
  EXPECT_EQ(all.server_name, "db");
  EXPECT_TRUE(all.insecure_skip_verify);
  EXPECT_EQ(all.first_given, "tls_ca");  // in the order of the names
  ASSERT_OK_AND_ASSIGN(TlsUriOptions none, take("", true));
  EXPECT_EQ(none.first_given, "");

  const struct {
    const char* query;
    const char* says;
  } bad[] = {
      {"tls_ca=", "tls_ca is empty"},
      {"tls_cert=c.pem", "tls_cert and tls_key go together"},
      {"tls_key=k.pem", "tls_cert and tls_key go together"},
      {"tls_insecure_skip_verify=yes", "true or false, not 'yes'"},
  };
  for (const auto& b : bad) {
    absl::StatusOr<TlsUriOptions> tls = take(b.query, true);
    EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument)
        << b.query;
    EXPECT_THAT(tls.status().message(), HasSubstr(b.says));
  }
  // A scheme that cannot skip the check leaves the option unknown.
  absl::StatusOr<Uri> uri = ParseUri("x://h?tls_insecure_skip_verify=true");
  ASSERT_OK(uri);
  UriParams params(*uri);
  ASSERT_OK(TakeTlsOptions(params, /*with_insecure_skip_verify=*/false));
  EXPECT_THAT(params.RejectUnknown("x").message(),
              HasSubstr("'tls_insecure_skip_verify'"));
}

}  // namespace
}  // namespace dlock
