// Copyright dlock authors. Unit tests of dlock::Connect() and the backend
// registry: what is rejected before a backend is reached, and what a client
// reports about itself. Uses memory:// where a backend is needed.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "dlock/backend/backend.h"
#include "dlock/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Message(const absl::StatusOr<std::unique_ptr<LockClient>>& client) {
  return std::string(client.status().message());
}

TEST(Connect, UnknownSchemeListsTheKnownOnes) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect("nosuch://h");
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(client), HasSubstr("nosuch"));
  ASSERT_THAT(RegisteredSchemes(), ::testing::Contains("memory"));
  for (const std::string& scheme : RegisteredSchemes()) {
    EXPECT_THAT(Message(client), HasSubstr(scheme));
  }
}

TEST(Connect, SchemeIsCaseInsensitive) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect("MEMORY://x");
  ASSERT_OK(client);
}

TEST(Connect, MalformedUriIsInvalidArgument) {
  for (const char* uri : {"", "memory", "memory:/x", "memory://x?a=1&a=2"}) {
    EXPECT_EQ(Connect(uri).status().code(), absl::StatusCode::kInvalidArgument)
        << uri;
  }
}

TEST(Connect, NamespaceComesFromUriOrOptionsElseDefault) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect("memory://");
  ASSERT_OK(client);
  EXPECT_EQ((*client)->lock_namespace(), "default");

  client = Connect("memory://?namespace=orders");
  ASSERT_OK(client);
  EXPECT_EQ((*client)->lock_namespace(), "orders");

  ClientOptions options;
  options.lock_namespace = "billing";
  client = Connect("memory://", options);
  ASSERT_OK(client);
  EXPECT_EQ((*client)->lock_namespace(), "billing");

  // The same value in both places is no conflict.
  client = Connect("memory://?namespace=billing", options);
  ASSERT_OK(client);
  EXPECT_EQ((*client)->lock_namespace(), "billing");
}

TEST(Connect, NamespaceConflictIsInvalidArgument) {
  ClientOptions options;
  options.lock_namespace = "billing";
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect("memory://?namespace=orders", options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(client), HasSubstr("orders"));
  EXPECT_THAT(Message(client), HasSubstr("billing"));
}

TEST(Connect, BadNamespaceIsInvalidArgument) {
  const std::vector<std::string> bad = {
      "has space", "a/b", "a:b", "{a}", "锁", "a*", std::string(65, 'n')};
  for (const std::string& ns : bad) {
    ClientOptions options;
    options.lock_namespace = ns;
    EXPECT_EQ(Connect("memory://", options).status().code(),
              absl::StatusCode::kInvalidArgument)
        << ns;
  }
  EXPECT_EQ(Connect("memory://?namespace=a%2Fb").status().code(),
            absl::StatusCode::kInvalidArgument);
  ClientOptions longest;
  longest.lock_namespace = std::string(64, 'n');
  EXPECT_OK(Connect("memory://", longest));
  longest.lock_namespace = "Aa0._-";
  EXPECT_OK(Connect("memory://", longest));
}

TEST(Connect, BadOptionsAreInvalidArgument) {
  auto expect_invalid = [](ClientOptions options, const char* what) {
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        Connect("memory://", options);
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument)
        << what;
  };
  ClientOptions options;
  options.watchdog_lease = absl::Milliseconds(10);
  expect_invalid(options, "watchdog_lease 10ms");
  options.watchdog_lease = absl::InfiniteDuration();
  expect_invalid(options, "watchdog_lease inf");
  options = {};
  options.fallback_poll = absl::ZeroDuration();
  expect_invalid(options, "fallback_poll 0");
  options.fallback_poll = absl::InfiniteDuration();
  expect_invalid(options, "fallback_poll inf");
  options = {};
  options.close_timeout = absl::Seconds(-1);
  expect_invalid(options, "close_timeout -1s");
  for (const char* id :
       {"xyz", "0123456789ABCDEF0123456789ABCDEF",
        "0123456789abcdef0123456789abcde", "0123456789abcdef0123456789abcdefa",
        "0123456789abcdef0123456789abcdeg"}) {
    options = {};
    options.client_id = id;
    expect_invalid(options, id);
  }
}

TEST(Connect, UnknownBackendOptionNamesTheKey) {
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect("memory://x?namespace=n&tiemout=1s");
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(client), HasSubstr("tiemout"));
}

TEST(Connect, MemoryUriTakesOnlyAnInstanceName) {
  for (const char* uri : {"memory://x:1", "memory://x/path", "memory://a,b",
                          "memory://user@x", "memory://user:hunter2@x"}) {
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument)
        << uri;
    EXPECT_THAT(Message(client), Not(HasSubstr("hunter2")));
  }
}

// Whatever a backend makes of an unreachable address, its error never quotes
// the password.
TEST(Connect, NoSchemeQuotesThePassword) {
  for (const std::string& scheme : RegisteredSchemes()) {
    const std::string uri =
        absl::StrCat(scheme, "://alice:hunter2@127.0.0.1:1/0");
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
    EXPECT_FALSE(client.ok()) << uri;
    EXPECT_THAT(Message(client), Not(HasSubstr("hunter2"))) << uri;
  }
}

TEST(Connect, ClientIdIsRandomUnlessGiven) {
  absl::StatusOr<std::unique_ptr<LockClient>> a = Connect("memory://");
  absl::StatusOr<std::unique_ptr<LockClient>> b = Connect("memory://");
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_NE((*a)->client_id(), (*b)->client_id());
  for (const LockClient* client : {a->get(), b->get()}) {
    const std::string& id = client->client_id();
    EXPECT_EQ(id.size(), 32u);
    for (char c : id) {
      EXPECT_TRUE(absl::ascii_isxdigit(c) && !absl::ascii_isupper(c)) << id;
    }
  }
  EXPECT_NE((*a)->CurrentOwner(), (*b)->CurrentOwner());

  ClientOptions options;
  options.client_id = "0123456789abcdef0123456789abcdef";
  absl::StatusOr<std::unique_ptr<LockClient>> given =
      Connect("memory://", options);
  ASSERT_OK(given);
  EXPECT_EQ((*given)->client_id(), options.client_id);
  EXPECT_THAT((*given)->CurrentOwner(), HasSubstr(options.client_id));
}

TEST(Connect, EndpointIsTheRedactedUri) {
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect("memory://inst?namespace=n");
  ASSERT_OK(client);
  EXPECT_EQ((*client)->endpoint(), "memory://inst?namespace=n");
}

TEST(Connect, CloseIsIdempotentAndRefusesLaterCalls) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect("memory://");
  ASSERT_OK(client);
  absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
      (*client)->GetLock("x");
  ASSERT_OK(lock);
  EXPECT_OK((*client)->Close());
  EXPECT_OK((*client)->Close());
  EXPECT_EQ((*lock)->TryAcquire().status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*client)->Admin().List().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace dlock
