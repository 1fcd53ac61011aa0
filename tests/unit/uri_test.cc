// Copyright dlock authors. Unit tests of dlock/uri.h: ParseUri, Redacted,
// UriParams and ParsePositiveDuration.
#include "dlock/uri.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

constexpr char kPassword[] = "hunter2";

Uri MustParse(absl::string_view text) {
  absl::StatusOr<Uri> uri = ParseUri(text);
  EXPECT_OK(uri) << text;
  return uri.ok() ? *std::move(uri) : Uri{};
}

TEST(ParseUri, SplitsEveryPart) {
  Uri uri = MustParse(
      "REDIS://alice:s3cret@Cache-1:6380/"
      "2?namespace=orders&command_timeout=2s");
  EXPECT_EQ(uri.scheme, "redis");
  EXPECT_EQ(uri.user, "alice");
  EXPECT_EQ(uri.password, "s3cret");
  ASSERT_EQ(uri.hosts.size(), 1u);
  EXPECT_EQ(uri.hosts[0].host, "Cache-1");
  EXPECT_EQ(uri.hosts[0].port, 6380);
  EXPECT_EQ(uri.path, "2");
  EXPECT_THAT(uri.params, ElementsAre(Pair("namespace", "orders"),
                                      Pair("command_timeout", "2s")));
}

TEST(ParseUri, OptionalParts) {
  Uri bare = MustParse("memory://");
  EXPECT_EQ(bare.scheme, "memory");
  EXPECT_TRUE(bare.hosts.empty());
  EXPECT_EQ(bare.user, "");
  EXPECT_FALSE(bare.password.has_value());
  EXPECT_EQ(bare.path, "");
  EXPECT_TRUE(bare.params.empty());

  Uri named = MustParse("memory://tests");
  ASSERT_EQ(named.hosts.size(), 1u);
  EXPECT_EQ(named.hosts[0].host, "tests");
  EXPECT_FALSE(named.hosts[0].port.has_value());

  // A user without a password, and an empty password, are different.
  EXPECT_FALSE(MustParse("redis://bob@h").password.has_value());
  EXPECT_EQ(MustParse("redis://bob:@h").password, "");
  EXPECT_EQ(MustParse("redis://:pw@h").user, "");
}

TEST(ParseUri, HostListAndIpv6) {
  Uri uri = MustParse("zk://a:2181,b,[::1]:2182,[fe80::1]/chroot");
  ASSERT_EQ(uri.hosts.size(), 4u);
  EXPECT_EQ(uri.hosts[0].host, "a");
  EXPECT_EQ(uri.hosts[0].port, 2181);
  EXPECT_EQ(uri.hosts[1].host, "b");
  EXPECT_FALSE(uri.hosts[1].port.has_value());
  EXPECT_EQ(uri.hosts[2].host, "::1");
  EXPECT_EQ(uri.hosts[2].port, 2182);
  EXPECT_EQ(uri.hosts[3].host, "fe80::1");
  EXPECT_FALSE(uri.hosts[3].port.has_value());
  EXPECT_EQ(uri.path, "chroot");
}

TEST(DialAddress, BracketsIpv6AndFillsTheDefaultPort) {
  Uri uri = MustParse("etcd://a:2380,b,[::1]:2382,[fe80::1]");
  EXPECT_EQ(DialAddress(uri.hosts[0], 2379), "a:2380");
  EXPECT_EQ(DialAddress(uri.hosts[1], 2379), "b:2379");
  EXPECT_EQ(DialAddress(uri.hosts[2], 2379), "[::1]:2382");
  EXPECT_EQ(DialAddress(uri.hosts[3], 2379), "[fe80::1]:2379");
}

TEST(ParseUri, PercentDecodesEveryPart) {
  Uri uri = MustParse(
      "redis://al%69ce:p%40ss%2Fw%3Fo%23rd@h/a%2Fb?name%20x=v%26w&k=%E9%94%81");
  EXPECT_EQ(uri.user, "alice");
  EXPECT_EQ(uri.password, "p@ss/w?o#rd");
  EXPECT_EQ(uri.path, "a/b");
  EXPECT_THAT(uri.params, ElementsAre(Pair("name x", "v&w"), Pair("k", "锁")));
}

TEST(ParseUri, EmptyQueryPartsAreIgnored) {
  EXPECT_THAT(MustParse("redis://h?&a=1&&b&").params,
              ElementsAre(Pair("a", "1"), Pair("b", "")));
}

TEST(ParseUri, RejectsMalformedUris) {
  for (const char* text : {
           "",
           "redis",
           "://h",
           "redis:/h",
           "re dis://h",
           "redis_x://h",
           "redis://h:0",
           "redis://h:65536",
           "redis://h:port",
           "redis://h:",
           "redis://h:-1",
           "redis://a,,b",
           "redis://a,",
           "redis://[::1",
           "redis://[::1]x",
           "redis://h#fragment",
           "redis://h?a=1&a=2",
           "redis://h?=1",
           "redis://h/%zz",
           "redis://h/%4",
           "redis://h?k=%g0",
           "redis://%zz@h",
       }) {
    absl::StatusOr<Uri> uri = ParseUri(text);
    EXPECT_EQ(uri.status().code(), absl::StatusCode::kInvalidArgument)
        << "'" << text << "': " << uri.status();
  }
}

TEST(ParseUri, ErrorsSayWhatIsWrong) {
  EXPECT_THAT(ParseUri("localhost:6379").status().message(),
              HasSubstr("scheme://"));
  EXPECT_THAT(ParseUri("redis://h:99999").status().message(),
              HasSubstr("port"));
  EXPECT_THAT(ParseUri("redis://h?db=1&db=2").status().message(),
              HasSubstr("'db'"));
  EXPECT_THAT(ParseUri("redis://h#x").status().message(), HasSubstr("#"));
}

TEST(Redacted, HidesThePassword) {
  Uri uri = MustParse("redis://alice:hunter2@h:6379/3?namespace=n");
  EXPECT_EQ(uri.Redacted(), "redis://alice:***@h:6379/3?namespace=n");
  EXPECT_EQ(MustParse("redis://:hunter2@h").Redacted(), "redis://:***@h");
  // An empty password is still a password.
  EXPECT_EQ(MustParse("redis://bob:@h").Redacted(), "redis://bob:***@h");
}

TEST(Redacted, HidesSecretQueryParameters) {
  Uri uri = MustParse(
      "postgres://h?password=hunter2&sslpassword=hunter2&AUTH=hunter2&x=1");
  EXPECT_EQ(uri.Redacted(),
            "postgres://h?password=***&sslpassword=***&AUTH=***&x=1");
}

// A secret escaped into an option's name is not shown as the name either.
TEST(Redacted, HidesAnOptionNameThatMayBeTheSecret) {
  EXPECT_EQ(MustParse("postgres://h?password%3Dhunter2").Redacted(),
            "postgres://h?***=***");
  EXPECT_EQ(MustParse("postgres://h?PassWord=hunter2&pwd=hunter2").Redacted(),
            "postgres://h?PassWord=***&pwd=***");
}

// Every spelling of a password a backend URI can carry, found without
// quoting it: the rule a profile file is checked by.
TEST(SecretPart, FindsEverySpellingOfAPassword) {
  const std::pair<const char*, const char*> cases[] = {
      {"redis://:hunter2@h", "the user info"},
      {"redis://alice:hunter2@h:6379/0", "the user info"},
      {"redis://bob:@h", "the user info"},  // empty, still a password
      {"rediss://u:hunter2@h", "the user info"},
      {"redlock://u:hunter2@a:1,b:2,c:3", "the user info"},
      {"redis-sentinel://:hunter2@s1:26379,s2:26379/mm", "the user info"},
      {"postgres://u:hunter2@h/db", "the user info"},
      {"postgresql://u:hunter2@h1:5432,h2:5432/db", "the user info"},
      {"postgres://u@h/db?password=hunter2", "option 'password'"},
      {"postgres://h/db?PASSWORD=hunter2", "option 'PASSWORD'"},
      {"postgres://h/db?pass%77ord=hunter2", "option 'password'"},
      {"postgres://h/db?sslpassword=hunter2", "option 'sslpassword'"},
      {"postgres://h/db?user=u&password=", "option 'password'"},
      {"zk://h:2181?auth=digest:alice:hunter2", "option 'auth'"},
      {"zk://h:2181?auth=digest%3Aalice%3Ahunter2", "option 'auth'"},
      {"zk://h:2181?AUTH=digest:alice:hunter2", "option 'AUTH'"},
      {"zk://h:2181?auth=alice:hunter2", "option 'auth'"},
      {"zk://h:2181?auth=hunter2", "option 'auth'"},
      {"zk://h:2181?auth=digest:", "option 'auth'"},
      {"redis://h?secret=hunter2", "option 'secret'"},
      {"redis://h?passwd=hunter2", "option 'passwd'"},
  };
  for (const auto& [text, where] : cases) {
    std::optional<std::string> part = MustParse(text).SecretPart();
    ASSERT_TRUE(part.has_value()) << text;
    EXPECT_THAT(*part, HasSubstr(where)) << text;
    EXPECT_THAT(*part, Not(HasSubstr(kPassword))) << text;
  }
  EXPECT_THAT(*MustParse("zk://h?auth=digest:alice:hunter2").SecretPart(),
              HasSubstr("keep auth=digest:USER"));
}

TEST(SecretPart, NoneWhereThereIsNoPassword) {
  for (const char* text : {
           "redis://h:6379/0?namespace=n",
           "redis://alice@h",  // a user name alone
           "postgres://u@h/db?sslmode=require&passfile=/etc/dlock/pgpass",
           "zk://h:2181/chroot?auth=digest:alice",  // the password apart
           "memory://",
       }) {
    EXPECT_EQ(MustParse(text).SecretPart(), std::nullopt) << text;
  }
}

TEST(Redacted, KeepsEverythingElse) {
  EXPECT_EQ(MustParse("redis://h:1").Redacted(), "redis://h:1");
  EXPECT_EQ(MustParse("redis://bob@h").Redacted(), "redis://bob@h");
  EXPECT_EQ(MustParse("memory://").Redacted(), "memory://");
  EXPECT_EQ(MustParse("zk://a:1,[::1]:2/c").Redacted(), "zk://a:1,[::1]:2/c");
}

// A password must never appear in a message, even when the URI around it is
// malformed or the password holds characters that should have been escaped.
// A Uri prints itself back: what was decoded is encoded again where it
// must be, so that code edits a URI by its parts, never by its text.
TEST(ToString, ParsesBackToTheSameUri) {
  Uri uri = MustParse("redis://h:1/3?namespace=n");
  uri.user = "al@ice:x";
  uri.password = "p@ss/w:rd?#%& ok";
  uri.params.emplace_back("application_name", "svc@host a&b=c");
  uri.path = "db/with space";
  const std::string text = uri.ToString();
  EXPECT_EQ(text,
            "redis://al%40ice%3Ax:p%40ss%2Fw:rd%3F%23%25&%20ok@h:1/"
            "db/with%20space?namespace=n&application_name=svc@host%20a%26b=c");
  Uri again = MustParse(text);
  EXPECT_EQ(again.user, uri.user);
  EXPECT_EQ(again.password, uri.password);
  EXPECT_EQ(again.path, uri.path);
  EXPECT_EQ(again.params, uri.params);
  EXPECT_EQ(again.ToString(), text);
  // Redacted prints the same, less the password.
  EXPECT_EQ(uri.Redacted(),
            "redis://al%40ice%3Ax:***@h:1/db/with%20space?namespace=n&"
            "application_name=svc@host%20a%26b=c");
  EXPECT_EQ(MustParse("zk://a:1,[::1]:2/c").ToString(), "zk://a:1,[::1]:2/c");
}

TEST(RedactUnparsable, ShowsTheSchemeAtMost) {
  EXPECT_EQ(RedactUnparsable("redis://al:pw@h:notaport"), "redis://...");
  EXPECT_EQ(RedactUnparsable("al:pw@h"), "(not a URI)");
}

TEST(UriErrors, NeverQuoteThePassword) {
  for (const char* text : {
           "redis://alice:hunter2@h:notaport",
           "redis://alice:hunter2@h:0",
           "redis://alice:hunter2@h?a=1&a=2",
           "redis://alice:hunter2@h/%zz",
           "redis://alice:hunter2@[::1",
           "redis://alice:hunt%zzer2@h",
           "redis://alice:hunter2#x@h",
           // Unescaped '/' or '?' in the password end the authority early.
           "redis://alice:hunter2/x@h:6379",
           "redis://alice:hunter2?x@h:6379",
           "redis://:hunter2/x@h",
           // ...or leave a numeric start of it to pass for a port.
           "redis://alice:6379/hunter2@h",
       }) {
    absl::StatusOr<Uri> uri = ParseUri(text);
    if (uri.ok()) {
      EXPECT_THAT(uri->Redacted(), Not(HasSubstr(kPassword))) << text;
      for (const HostPort& host : uri->hosts) {
        EXPECT_THAT(host.host, Not(HasSubstr(kPassword))) << text;
      }
    } else {
      EXPECT_THAT(std::string(uri.status().message()),
                  Not(HasSubstr(kPassword)))
          << text;
      // Connect says no more than ParseUri.
      absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(text);
      EXPECT_THAT(std::string(client.status().message()),
                  Not(HasSubstr(kPassword)))
          << text;
    }
  }
}

// A user:password with the '@host' left out reads as a host and a port.
// Whatever the shape, the password is never quoted back: not in a message,
// not in Redacted(), not by Connect.
TEST(UriErrors, NeverQuoteThePasswordWhateverTheShape) {
  constexpr char kSecret[] = "Zq7pw-s3cr3t";
  constexpr char kNumericSecret[] = "987654321";  // too big for a port
  const std::vector<std::string> shapes = {
      "redis://user:PW",
      "redis://user:PW@",
      "redis://user:PW@/0",
      "redis://:PW",
      "redis://:PW@",
      "redis://user:PW:6379",
      "redis://user:PW/0",
      "redis://user:PW?namespace=n",
      "redis://user:PW,h",
      "redis://user:PW%zz",
      "zk://u:PW",
      "zk://u:PW/chroot",
      "zk://a:2181,u:PW",
      "zk://u:PW:2181,b:2181",
      "postgres://u:PW/db",
      "postgres://u:PW@/db",
      "postgresql://u:PW",
      "postgres://u:PW?application_name=x",
      "redis://user:PW@h:PW",
      "redis://user:PW@[::1]:PW",
      // An unescaped '?' in the password whose start passes for a port.
      "redis://alice:6379?PW@h",
      "redis://alice:6379?xPW@h:6379/0",
  };
  for (const char* secret : {kSecret, kNumericSecret}) {
    for (std::string text : shapes) {
      for (size_t at = text.find("PW"); at != std::string::npos;
           at = text.find("PW")) {
        text.replace(at, 2, secret);
      }
      absl::StatusOr<Uri> uri = ParseUri(text);
      if (uri.ok()) {
        EXPECT_THAT(uri->Redacted(), Not(HasSubstr(secret))) << text;
        for (const HostPort& host : uri->hosts) {
          EXPECT_THAT(host.host, Not(HasSubstr(secret))) << text;
        }
        for (const auto& [key, value] : uri->params) {
          EXPECT_THAT(key, Not(HasSubstr(secret))) << text;
        }
      } else {
        EXPECT_EQ(uri.status().code(), absl::StatusCode::kInvalidArgument)
            << text;
        EXPECT_THAT(std::string(uri.status().message()), Not(HasSubstr(secret)))
            << text;
      }
      absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(
          absl::StrCat(text, text.find('?') == std::string::npos ? "?" : "&",
                       "connect_timeout=100ms"));
      EXPECT_THAT(std::string(client.status().message()),
                  Not(HasSubstr(secret)))
          << text;
    }
  }
}

// What a person needs to fix "redis://user:password": the '@host' part.
TEST(UriErrors, AUserPasswordWithoutAHostSaysToAddTheHost) {
  for (const char* text : {"redis://user:s3cr3tpw", "redis://:s3cr3tpw",
                           "zk://u:s3cr3tpw", "postgres://u:s3cr3tpw/db"}) {
    absl::StatusOr<Uri> uri = ParseUri(text);
    ASSERT_EQ(uri.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(uri.status().message(), HasSubstr("port")) << text;
    EXPECT_THAT(uri.status().message(), HasSubstr("user:password")) << text;
    EXPECT_THAT(uri.status().message(), HasSubstr("'@'")) << text;
    EXPECT_THAT(uri.status().message(), Not(HasSubstr("s3cr3tpw"))) << text;
  }
  // A host with a bad port, after a userinfo, is just a bad port.
  absl::StatusOr<Uri> port = ParseUri("redis://u:pw@h:99999");
  EXPECT_THAT(port.status().message(),
              HasSubstr("not a number from 1 to 65535"));
  EXPECT_THAT(port.status().message(), Not(HasSubstr("user:password")));
  // "user:password:port" has the password in the host; say so, not quote it.
  absl::StatusOr<Uri> colon = ParseUri("redis://user:s3cr3tpw:6379");
  EXPECT_EQ(colon.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(colon.status().message(), HasSubstr("[::1]"));
  EXPECT_THAT(colon.status().message(), Not(HasSubstr("s3cr3tpw")));
}

// '@' is legal in a query; only the part before it ends at a userinfo.
TEST(ParseUri, KeepsAnAtSignInTheQuery) {
  Uri redis = MustParse("redis://h:6379?application_name=svc@host");
  ASSERT_EQ(redis.hosts.size(), 1u);
  EXPECT_EQ(redis.hosts[0].host, "h");
  EXPECT_EQ(redis.hosts[0].port, 6379);
  EXPECT_EQ(redis.user, "");
  EXPECT_THAT(redis.params, ElementsAre(Pair("application_name", "svc@host")));

  Uri pg = MustParse("postgres://u:p@h/db?application_name=a@b&x=c%40d");
  EXPECT_EQ(pg.user, "u");
  EXPECT_EQ(pg.password, "p");
  ASSERT_EQ(pg.hosts.size(), 1u);
  EXPECT_EQ(pg.hosts[0].host, "h");
  EXPECT_EQ(pg.path, "db");
  EXPECT_THAT(pg.params,
              ElementsAre(Pair("application_name", "a@b"), Pair("x", "c@d")));
  EXPECT_EQ(pg.Redacted(), "postgres://u:***@h/db?application_name=a@b&x=c@d");

  Uri zk = MustParse("zk://a:2181,b:2181/c?auth=digest:u:p@w");
  EXPECT_THAT(zk.params, ElementsAre(Pair("auth", "digest:u:p@w")));
  EXPECT_EQ(zk.Redacted(), "zk://a:2181,b:2181/c?auth=***");

  // Still caught: an unescaped '/' or '?' in a password, before the query.
  for (const char* text :
       {"redis://u:pw/x@h?a=b@c", "redis://u:pw?x@h", "redis://u:6379?x@h"}) {
    EXPECT_EQ(ParseUri(text).status().code(),
              absl::StatusCode::kInvalidArgument)
        << text;
    EXPECT_THAT(ParseUri(text).status().message(), HasSubstr("%3F")) << text;
  }
}

TEST(ParsePositiveDuration, AcceptsCommonForms) {
  const std::vector<std::pair<const char*, absl::Duration>> cases = {
      {"500ms", absl::Milliseconds(500)}, {"30s", absl::Seconds(30)},
      {"2m", absl::Minutes(2)},           {"1h", absl::Hours(1)},
      {"1.5s", absl::Milliseconds(1500)}, {"1h30m", absl::Minutes(90)},
      {"250us", absl::Microseconds(250)},
  };
  for (const auto& [text, want] : cases) {
    absl::StatusOr<absl::Duration> got = ParsePositiveDuration(text);
    ASSERT_OK(got) << text;
    EXPECT_EQ(*got, want) << text;
  }
}

TEST(ParsePositiveDuration, RejectsZeroNegativeInfiniteAndJunk) {
  for (const char* text :
       {"", "0", "0s", "-1s", "inf", "-inf", "abc", "10", "1x", "s", " 1s"}) {
    absl::StatusOr<absl::Duration> got = ParsePositiveDuration(text);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
        << "'" << text << "'";
    EXPECT_THAT(got.status().message(), HasSubstr("500ms")) << text;
  }
}

TEST(UriParams, TakesEachParameterOnce) {
  Uri uri = MustParse("x://h?a=1&b=2&c=3");
  UriParams params(uri);
  EXPECT_EQ(params.TakeString("b"), "2");
  EXPECT_EQ(params.TakeString("b"), std::nullopt);
  EXPECT_EQ(params.TakeString("missing"), std::nullopt);
  EXPECT_THAT(params.Rest(), ElementsAre(Pair("a", "1"), Pair("c", "3")));
}

TEST(UriParams, TakesDurations) {
  Uri uri = MustParse("x://h?timeout=250ms&bad=soon&zero=0s");
  UriParams params(uri);
  absl::StatusOr<std::optional<absl::Duration>> timeout =
      params.TakeDuration("timeout");
  ASSERT_OK(timeout);
  EXPECT_EQ(*timeout, absl::Milliseconds(250));

  absl::StatusOr<std::optional<absl::Duration>> absent =
      params.TakeDuration("absent");
  ASSERT_OK(absent);
  EXPECT_FALSE(absent->has_value());

  for (const char* key : {"bad", "zero"}) {
    absl::StatusOr<std::optional<absl::Duration>> bad =
        params.TakeDuration(key);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(bad.status().message(), HasSubstr(key));
    EXPECT_THAT(bad.status().message(), HasSubstr("500ms"));
  }
}

TEST(UriParams, TakesIntsInRange) {
  Uri uri = MustParse("x://h?db=3&low=-1&high=16&word=three");
  UriParams params(uri);
  absl::StatusOr<std::optional<int64_t>> db = params.TakeInt("db", 0, 15);
  ASSERT_OK(db);
  EXPECT_EQ(*db, 3);
  absl::StatusOr<std::optional<int64_t>> absent = params.TakeInt("x", 0, 1);
  ASSERT_OK(absent);
  EXPECT_FALSE(absent->has_value());
  for (const char* key : {"low", "high", "word"}) {
    absl::StatusOr<std::optional<int64_t>> bad = params.TakeInt(key, 0, 15);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_THAT(bad.status().message(), HasSubstr(key));
    EXPECT_THAT(bad.status().message(), HasSubstr("0 to 15"));
  }
}

TEST(UriParams, RejectUnknownNamesTheKeyAndTheKnownOnes) {
  Uri uri = MustParse("redis://h?namespace=n&tiemout=1s&other=2");
  UriParams params(uri);
  params.TakeString("namespace");
  params.TakeString("timeout");  // asked for, not given
  absl::Status status = params.RejectUnknown("redis");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'tiemout'"));
  EXPECT_THAT(status.message(), HasSubstr("namespace, timeout"));
  EXPECT_THAT(status.message(), HasSubstr("redis://"));
  EXPECT_THAT(status.message(),
              HasSubstr("; on every scheme: namespace, connect_timeout, "
                        "operation_timeout"));

  params.TakeString("tiemout");
  params.TakeString("other");
  EXPECT_OK(params.RejectUnknown("redis"));
}

}  // namespace
}  // namespace dlock
