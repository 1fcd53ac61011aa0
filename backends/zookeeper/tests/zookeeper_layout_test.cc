// Copyright dlock authors. The zk:// backend without a server: lock names
// map injectively to one safe path component (C15), queues sort by sequence
// number, node data round-trips, bad URIs are rejected before connecting.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "zk_layout.h"

namespace dlock::zk {
namespace {

TEST(ZooKeeperLayout, NamesBecomeOneSafeComponentAndComeBack) {
  const std::vector<std::string> names = {
      "orders",
      "orders/42",
      "..",
      ".",
      "...",
      "a b",
      "%2F",
      "%",
      "{tag}*",
      "quote'\"",
      "Zürich",
      "東京",
      "\xEE\x80\x80" /* U+E000, private use: ZooKeeper rejects it raw */,
      std::string(512, 'x'),
      "a%b"};
  std::set<std::string> seen;
  for (const std::string& name : names) {
    const std::string component = EncodeName(name);
    EXPECT_FALSE(absl::StrContains(component, "/")) << name;
    EXPECT_NE(component, ".");
    EXPECT_NE(component, "..");
    for (char c : component) {
      EXPECT_TRUE(absl::ascii_isalnum(c) || c == '%' || c == '_' || c == '-' ||
                  c == '.')
          << name;
    }
    EXPECT_EQ(DecodeName(component), name);
    EXPECT_TRUE(seen.insert(component).second) << "collision for " << name;
  }
  EXPECT_EQ(EncodeName("orders/42"), "orders%2F42");
  EXPECT_EQ(EncodeName(".."), "%2E%2E");
  // What EncodeName cannot produce is not a lock name.
  EXPECT_FALSE(DecodeName("a%2Eb").has_value());  // "a.b" keeps its dot
  EXPECT_FALSE(DecodeName("a b").has_value());
  EXPECT_FALSE(DecodeName("%zz").has_value());
  EXPECT_FALSE(DecodeName("%2").has_value());
}

TEST(ZooKeeperLayout, QueueSortsBySequenceNotByClient) {
  const std::vector<std::string> queue =
      SortedQueue({"ffff-1-lock-0000000010", "0000-7-lock-0000000002",
                   "not a lock node", "aaaa-3-lock-0000000009"});
  EXPECT_EQ(queue, (std::vector<std::string>{"0000-7-lock-0000000002",
                                             "aaaa-3-lock-0000000009",
                                             "ffff-1-lock-0000000010"}));
  EXPECT_EQ(SequenceOf("x-lock-0000000123"), 123);
  EXPECT_FALSE(SequenceOf("x-lock-12").has_value());
}

TEST(ZooKeeperLayout, NodeDataRoundTrips) {
  NodeData data{.owner = "t:job 7 with spaces",
                .holds = 3,
                .lease_ms = 1500,
                .kept_ms = 6000,
                .since_ms = 1700000000000};
  std::optional<NodeData> parsed = Parse(Serialize(data));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->owner, data.owner);
  EXPECT_EQ(parsed->holds, 3);
  EXPECT_EQ(parsed->lease_ms, 1500);
  EXPECT_EQ(parsed->kept_ms, 6000);
  EXPECT_EQ(parsed->since_ms, 1700000000000);
  EXPECT_FALSE(Parse("").has_value());
  EXPECT_FALSE(Parse("dlock1 0 1 1 0 owner").has_value());  // no holds
  EXPECT_FALSE(Parse("other 1 1 1 0 owner").has_value());
}

TEST(ZooKeeperLayout, AnElectionsValueFollowsTheLineAndAPlainLockHasNone) {
  NodeData data{.owner = "c:client:1", .lease_ms = 500, .kept_ms = 500};
  EXPECT_FALSE(Parse(Serialize(data))->value.has_value());
  data.value = "10.0.0.7:8080 with spaces\nand a newline";
  std::optional<NodeData> parsed = Parse(Serialize(data));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->owner, "c:client:1") << "the value leaked into the owner";
  EXPECT_EQ(parsed->value, data.value);
  data.value = "";
  EXPECT_EQ(Parse(Serialize(data))->value, "") << "an empty value is a value";
}

TEST(ZooKeeperLayout, KindsOfObjectHaveParentsApart) {
  for (const std::string& name : {"jobs", ".", "..", "%1Fejobs", "a/b"}) {
    const std::string lock = ObjectComponent(ObjectKind::kLock, name);
    const std::string election = ObjectComponent(ObjectKind::kElection, name);
    EXPECT_NE(lock, election) << name;
    EXPECT_TRUE(absl::StartsWith(election, "%1Fe")) << election;
    EXPECT_EQ(ObjectNameOf(ObjectKind::kLock, lock), name);
    EXPECT_EQ(ObjectNameOf(ObjectKind::kElection, election), name);
    // Listing one kind never finds another's.
    EXPECT_FALSE(ObjectNameOf(ObjectKind::kLock, election).has_value());
    EXPECT_FALSE(ObjectNameOf(ObjectKind::kElection, lock).has_value());
    EXPECT_FALSE(ObjectNameOf(ObjectKind::kSemaphore, election).has_value());
  }
}

TEST(ZooKeeperLayout, AReadNodeIsALockNodeToThePreviousLayout) {
  const std::string read =
      absl::StrCat("c-ab12-3-", kReadTag, "lock-0000000007");
  EXPECT_TRUE(IsReadNode(read));
  EXPECT_FALSE(IsReadNode("c-ab12-3-lock-0000000008"));
  EXPECT_FALSE(IsReadNode("read-lock-0000000008")) << "no client part";
  // Writers of the previous layout sort it into their queue and wait.
  EXPECT_EQ(SortedQueue({"c-ab12-4-lock-0000000008", read}),
            (std::vector<std::string>{read, "c-ab12-4-lock-0000000008"}));
  // Its owner is never the reader's own owner id, so such a client never
  // re-enters a read node as its write hold.
  EXPECT_NE(ReaderOwner("t:job"), "t:job");
  EXPECT_EQ(OwnerOfReader(ReaderOwner("t:job")), "t:job");
  EXPECT_EQ(OwnerOfReader("t:job"), "") << "not a reader's";
}

TEST(ZooKeeperLayout, AWritersReadCarriesTheWritersToken) {
  NodeData read{.owner = ReaderOwner("c:x:1"), .lease_ms = 1, .kept_ms = 1};
  EXPECT_EQ(TokenOf(read, 90), 90u) << "a reader's own czxid";
  read.value = "42";
  EXPECT_EQ(TokenOf(*Parse(Serialize(read)), 90), 42u);
  NodeData leader{.owner = "c:x:1", .lease_ms = 1, .kept_ms = 1};
  leader.value = "42";  // an election's value is no token
  EXPECT_EQ(TokenOf(leader, 90), 90u);
}

TEST(ZooKeeperLayout, ASemaphoreNodeNamesItsPermitsAndN) {
  const std::string node =
      absl::StrCat("client-1-ab12-7-", PermitsTag({.permits = 2, .limit = 5}),
                   "lock-0000000042");
  EXPECT_EQ(SequenceOf(node), 42) << "a semaphore node is a queue node";
  std::optional<PermitsAsked> asked = PermitsOf(node);
  ASSERT_TRUE(asked.has_value());
  EXPECT_EQ(asked->permits, 2);
  EXPECT_EQ(asked->limit, 5);
  // A client id may hold dashes and letters: only the last part counts.
  EXPECT_EQ(PermitsOf("s1of2-x-9-s3of4-lock-0000000001")->limit, 4);
  EXPECT_FALSE(PermitsOf("client-1-ab12-7-lock-0000000042").has_value());
  EXPECT_FALSE(PermitsOf("c-1-s3of2-lock-0000000001").has_value());
  EXPECT_FALSE(PermitsOf("c-1-s2of5-lock-12").has_value());
}

TEST(ZooKeeperLayout, AdmissionValueSaysWaitingOrTheSlots) {
  EXPECT_FALSE(AdmittedSlots(WaitingValue()).has_value());
  EXPECT_FALSE(AdmittedSlots(std::nullopt).has_value());
  EXPECT_EQ(AdmittedSlots(AdmittedValue({0, 3, 4})),
            (std::vector<int64_t>{0, 3, 4}));
  NodeData data{.owner = "t:job", .lease_ms = 1, .kept_ms = 1};
  data.value = AdmittedValue({1});
  EXPECT_EQ(AdmittedSlots(Parse(Serialize(data))->value),
            (std::vector<int64_t>{1}));
}

TEST(ZooKeeperUri, BadUrisAreInvalidArgumentWithoutThePassword) {
  for (const char* uri : {
           "zk://",
           "zk://user:s3cret@127.0.0.1:2181",
           "zk://127.0.0.1:2181?auth=s3cret",
           "zk://127.0.0.1:2181?auth=digest:s3cret",
           "zk://127.0.0.1:2181?auth=sasl:u:s3cret",
           "zk://127.0.0.1:2181?session_timeout=fast",
           "zk://127.0.0.1:2181?session_timeout=10ms",
           "zk://127.0.0.1:2181/a/../b",
           "zk://127.0.0.1:2181?nope=1&auth=digest:u:s3cret",
           // The password apart (where a profile's password_env puts it)
           // goes with auth=digest:USER, and only with it.
           "zk://:s3cret@127.0.0.1:2181",
           "zk://:s3cret@127.0.0.1:2181?auth=digest:u:s3cret",
           "zk://:s3cret@127.0.0.1:2181?auth=digest:",
           "zk://127.0.0.1:2181?auth=digest:u",
       }) {
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
    EXPECT_TRUE(absl::IsInvalidArgument(client.status()))
        << uri << ": " << client.status();
    EXPECT_FALSE(absl::StrContains(client.status().message(), "s3cret"))
        << client.status();
  }
}

TEST(ZooKeeperUri, NoServerIsUnavailableNamingTheEndpoint) {
  for (const char* uri :
       {"zk://127.0.0.1:1?connect_timeout=300ms&auth=digest:u:s3cret",
        "zk://:s3cret@127.0.0.1:1?connect_timeout=300ms&auth=digest:u"}) {
    absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(uri);
    EXPECT_TRUE(absl::IsUnavailable(client.status())) << client.status();
    EXPECT_TRUE(absl::StrContains(client.status().message(), "127.0.0.1:1"));
    EXPECT_FALSE(absl::StrContains(client.status().message(), "s3cret"));
  }
}

}  // namespace
}  // namespace dlock::zk
