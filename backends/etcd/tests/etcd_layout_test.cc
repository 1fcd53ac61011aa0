// Copyright dlock authors. The etcd:// backend's key layout and lock values
// (etcd_layout.h): namespaces never share a key (C16), nor a liveness key,
// and a value gives back what was written, whatever bytes the owner id
// holds.
#include "etcd_layout.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dlock::etcd {
namespace {

TEST(EtcdLayout, KeysOfANamespaceShareItsPrefixAndNoOther) {
  const Layout plain("team");
  EXPECT_EQ(plain.prefix(), "/dlock/team/");
  EXPECT_EQ(plain.Key("a/b"), "/dlock/team/a/b");
  EXPECT_EQ(plain.NameOf("/dlock/team/a/b"), "a/b");
  EXPECT_EQ(plain.NameOf("/dlock/other/a"), std::nullopt);

  // "team/x" + "y" and "team" + "x/y" would collide without escaping.
  const Layout slashed("team/x");
  EXPECT_EQ(slashed.prefix(), "/dlock/team%2Fx/");
  EXPECT_NE(slashed.Key("y"), plain.Key("x/y"));
  EXPECT_EQ(plain.NameOf(slashed.Key("y")), std::nullopt);
  // An escape in a namespace is escaped too.
  EXPECT_NE(Layout("a%2Fb").prefix(), Layout("a/b").prefix());
}

TEST(EtcdLayout, LivenessKeysAreNoNamespacesLocks) {
  EXPECT_EQ(LivenessKey("c1-2.3"), "/dlock/%live/c1-2.3");
  for (const char* ns : {"%live", "live", "%", "default"}) {
    EXPECT_EQ(Layout(ns).NameOf(LivenessKey("c1-2.3")), std::nullopt) << ns;
  }
}

TEST(EtcdLayout, ValuesRoundTripAnyOwner) {
  const std::string owner = std::string("t:job 7\n\xff", 10) + '\0' + "x";
  const HoldValue value{.holds = 3,
                        .lease_ms = 60000,
                        .since_ms = 1700000000123,
                        .write_id = "0123abcd-9",
                        .live = {"c1-2.1", "c3-4.2"},
                        .owner = owner};
  const std::optional<HoldValue> back = Decode(Encode(value));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->holds, 3);
  EXPECT_EQ(back->lease_ms, 60000);
  EXPECT_EQ(back->since_ms, 1700000000123);
  EXPECT_EQ(back->write_id, "0123abcd-9");
  EXPECT_EQ(back->live, (std::vector<std::string>{"c1-2.1", "c3-4.2"}));
  EXPECT_EQ(back->owner, owner);
  EXPECT_FALSE(back->kept());

  const std::optional<HoldValue> kept =
      Decode(Encode(HoldValue{.holds = 0, .lease_ms = 1500}));
  ASSERT_TRUE(kept.has_value());
  EXPECT_TRUE(kept->kept());
  EXPECT_TRUE(kept->live.empty());
}

// The clients whose liveness protects a hold (PostgreSQL's live_ids rule).
TEST(EtcdLayout, AHoldIsProtectedByTheLivenessOfEveryClientItIsHeldThrough) {
  HoldValue value;
  AddLiveness(value, "a.1", /*fresh=*/true);
  EXPECT_EQ(value.live, std::vector<std::string>{"a.1"});
  AddLiveness(value, "b.1", /*fresh=*/false);
  AddLiveness(value, "a.1", /*fresh=*/false);  // listed once
  EXPECT_EQ(value.live, (std::vector<std::string>{"a.1", "b.1"}));
  // A sharer with liveness off believes the hold until its lease ends: so
  // must everyone, for good.
  AddLiveness(value, std::nullopt, /*fresh=*/false);
  EXPECT_TRUE(value.live.empty());
  AddLiveness(value, "c.1", /*fresh=*/false);
  EXPECT_TRUE(value.live.empty());
  // A fresh hold is its client's alone.
  AddLiveness(value, "c.1", /*fresh=*/true);
  EXPECT_EQ(value.live, std::vector<std::string>{"c.1"});
  AddLiveness(value, std::nullopt, /*fresh=*/true);
  EXPECT_TRUE(value.live.empty());
}

// An election's leadership carries the leader's value (C24), any bytes.
TEST(EtcdLayout, ALeadersValueRoundTripsBesideItsOwner) {
  const HoldValue value{.holds = 1,
                        .lease_ms = 5000,
                        .since_ms = 17,
                        .write_id = "w-1",
                        .value = std::string("host:1 \n\x1f", 9),
                        .owner = "t:o\nx"};
  std::optional<HoldValue> back = Decode(Encode(value));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->value, value.value);
  EXPECT_EQ(back->owner, value.owner);
  EXPECT_EQ(back->holds, 1);
  // A lock's value is written as before elections, without the field.
  EXPECT_EQ(Encode(HoldValue{.write_id = "w", .owner = "o"}),
            "dlock-etcd1 0 0 0 w -\no");
  // A value field longer than what follows is no value of ours.
  EXPECT_EQ(Decode("dlock-etcd1 1 2 3 w - 9\nab"), std::nullopt);
}

TEST(EtcdLayout, KindsOfObjectsNeverShareAName) {
  EXPECT_EQ(ObjectName(ObjectKind::kLock, "jobs"), "jobs");
  const std::string election = ObjectName(ObjectKind::kElection, "jobs");
  EXPECT_NE(election, "jobs");
  std::optional<NamedObject> parsed = ParseObjectName(election);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->kind, ObjectKind::kElection);
  EXPECT_EQ(parsed->name, "jobs");
  parsed = ParseObjectName("jobs");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->kind, ObjectKind::kLock);
  EXPECT_EQ(ParseObjectName("\x1fzjobs"), std::nullopt);
}

// One key per owner's grant under the semaphore's own prefix, and the head
// waiter's place beside them; owners may hold any byte (C6, C22).
TEST(EtcdLayout, ASemaphoresKeysShareItsPrefixAndNoOthers) {
  const std::string owner = std::string("t:a\x1fh", 6);
  const std::string grant =
      HoldObjectName(HoldShape{.kind = ObjectKind::kSemaphore}, "jobs", owner);
  EXPECT_TRUE(grant.starts_with(SemaphorePrefix("jobs")));
  EXPECT_TRUE(PlaceName("jobs").starts_with(SemaphorePrefix("jobs")));
  EXPECT_NE(grant, PlaceName("jobs"));
  // "jobs" is no prefix of "jobs2"'s keys.
  EXPECT_FALSE(
      HoldObjectName(HoldShape{.kind = ObjectKind::kSemaphore}, "jobs2", "o")
          .starts_with(SemaphorePrefix("jobs")));
  for (const std::string& name : {grant, PlaceName("jobs")}) {
    std::optional<NamedObject> parsed = ParseObjectName(name);
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(parsed->kind, ObjectKind::kSemaphore);
    EXPECT_EQ(parsed->name, "jobs");
  }
  EXPECT_EQ(
      HoldObjectName(HoldShape{.kind = ObjectKind::kElection}, "jobs", owner),
      ObjectName(ObjectKind::kElection, "jobs"));
}

// A lock's readers and its writer's intent are keys of their own beside
// the lock's, which listing locks must tell apart.
TEST(EtcdLayout, ReadersKeysAreTheirLocksAndNoLock) {
  const HoldShape read{.mode = HoldMode::kShared};
  const std::string reader = HoldObjectName(read, "cat", "t:o");
  EXPECT_TRUE(reader.starts_with(ReadersPrefix("cat")));
  EXPECT_FALSE(IntentName("cat").starts_with(ReadersPrefix("cat")));
  // A writer's grant compares that no key starts with it.
  for (const std::string& name : {reader, IntentName("cat")}) {
    EXPECT_TRUE(name.starts_with(ReadersAndIntentPrefix("cat")));
  }
  for (const std::string& other :
       {HoldObjectName(read, "cat2", "o"), IntentName("cat2"),
        HoldObjectName(read, "ca", "o"), std::string("cat")}) {
    EXPECT_FALSE(other.starts_with(ReadersAndIntentPrefix("cat")));
  }
  EXPECT_FALSE(
      HoldObjectName(read, "cat2", "o").starts_with(ReadersPrefix("cat")));
  for (const std::string& name : {reader, IntentName("cat")}) {
    std::optional<NamedObject> parsed = ParseObjectName(name);
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(parsed->kind, ObjectKind::kLock);
    EXPECT_EQ(parsed->name, "cat");
    EXPECT_TRUE(parsed->readers);
  }
  EXPECT_FALSE(ParseObjectName("cat")->readers);
  EXPECT_EQ(HoldObjectName(HoldShape{}, "cat", "o"), "cat");
}

TEST(EtcdLayout, PermitsRoundTrip) {
  const PermitsValue grant{.limit = 4, .permits = 2, .slots = {0, 3}};
  std::optional<PermitsValue> back = DecodePermits(EncodePermits(grant));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->limit, 4);
  EXPECT_EQ(back->permits, 2);
  EXPECT_EQ(back->slots, (std::vector<int64_t>{0, 3}));
  back = DecodePermits(EncodePermits(PermitsValue{.limit = 3, .permits = 1}));
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->slots.empty());  // a place
  EXPECT_EQ(DecodePermits("3 0 -"), std::nullopt);
  EXPECT_EQ(DecodePermits("3 1"), std::nullopt);
  EXPECT_EQ(DecodePermits("3 1 x"), std::nullopt);
}

TEST(EtcdLayout, ForeignValuesAreRefused) {
  EXPECT_EQ(Decode(""), std::nullopt);
  EXPECT_EQ(Decode("hello"), std::nullopt);
  EXPECT_EQ(Decode("dlock-etcd1 1 2 3\nowner"), std::nullopt);
  EXPECT_EQ(Decode("dlock-etcd1 1 2 3 w\nowner"), std::nullopt);
  EXPECT_EQ(Decode("dlock-etcd2 1 2 3 w\nowner"), std::nullopt);
  EXPECT_EQ(Decode("dlock-etcd1 -1 2 3 w -\nowner"), std::nullopt);
  EXPECT_TRUE(Decode("dlock-etcd1 1 2 3 w -\nowner").has_value());
}

}  // namespace
}  // namespace dlock::etcd
