// Copyright dlock authors. The etcd client on a real 3-member cluster when
// members fail: the member a client talks to is SIGKILLed (calls, the watch
// and the keepalive stream move on), the leader is killed, a reply is lost
// (an idempotent txn is retried and applied once; another write is told as
// of unknown outcome), and the cluster loses its quorum ("request timed
// out": unknown outcome).
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "etcd_client_test_util.h"
#include "fault_proxy.h"

namespace dlock::test {
namespace {

class EtcdClusterTest : public EtcdServerSuite<EtcdClusterTest> {
 public:
  static EtcdServer::Options ServerOptions() { return {.members = 3}; }

 protected:
  void SetUp() override {
    EtcdServerSuite::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_OK(server_->WaitForLeader(absl::Seconds(10)));
  }
  // Every member back, whatever the test did to them.
  void TearDown() override {
    if (server_ == nullptr) return;
    for (int i = 0; i < server_->size(); ++i) server_->ResumeMember(i);
    EXPECT_OK(server_->StartAll());
    EXPECT_OK(server_->WaitForLeader(absl::Seconds(10)));
  }

  // `first` and then the other members, so that a client talks to `first`.
  static std::vector<int> Starting(int first) {
    std::vector<int> order = {first};
    for (int i = 0; i < server_->size(); ++i) {
      if (i != first) order.push_back(i);
    }
    return order;
  }
  static int AFollower() {
    absl::StatusOr<int> leader = server_->Leader();
    return leader.ok() ? (*leader + 1) % server_->size() : 0;
  }
};

// Polls `done` every 20 ms until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& done,
                absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

TEST_F(EtcdClusterTest, KillingTheClientsMemberMovesCallsWatchAndKeepalives) {
  const int member = AFollower();
  ASSERT_OK_AND_ASSIGN(auto client, etcd::Client::Create(ClientOptionsFor(
                                        *server_, Starting(member))));
  const std::string key = TestKey();
  MustPut(*client, key, "before");
  WatchRecorder recorder;
  auto watch = client->StartWatch({.key = key}, recorder.Callback());
  ASSERT_TRUE(recorder.WaitStarted());
  ASSERT_OK_AND_ASSIGN(auto lease, client->LeaseGrant(absl::Seconds(2)));
  MustPut(*client, key + "/leased", "kept", lease.id());
  client->leases().Keep(lease.id(), absl::Milliseconds(500), [] {});
  ASSERT_TRUE(Eventually([&] {
    return client->leases().KnownAliveUntil(lease.id()).has_value();
  }));

  server_->KillMember(member);
  const absl::Time killed = absl::Now();
  ASSERT_TRUE(Eventually([&] { return watch->streams_opened() >= 2; }))
      << "the watch did not move to another member";
  // The dead member refuses connections: a write that is not idempotent
  // goes to the next member and is applied there, with no doubt.
  etcdserverpb::PutRequest put;
  put.set_key(key);
  put.set_value("after");
  EXPECT_OK(client->Put(put));
  ASSERT_TRUE(recorder.WaitEvents(1)) << "the moved watch missed the put";
  EXPECT_EQ(recorder.Events()[0].kv().value(), "after");

  // Past the lease's TTL twice over: kept alive from another member.
  absl::SleepFor(absl::Seconds(4) - (absl::Now() - killed));
  EXPECT_EQ(Get(*client, key + "/leased"), "kept");
  EXPECT_GE(client->leases().streams_opened(), 2);
  EXPECT_GT(*client->leases().KnownAliveUntil(lease.id()),
            etcd::MonotonicNow());
}

TEST_F(EtcdClusterTest, CallsGoOnThroughALeaderChange) {
  ASSERT_OK_AND_ASSIGN(const int leader, server_->Leader());
  ASSERT_OK_AND_ASSIGN(auto client, etcd::Client::Create(ClientOptionsFor(
                                        *server_, Starting(leader))));
  const std::string key = TestKey();
  ASSERT_OK_AND_ASSIGN(auto created,
                       client->Txn(etcd::CreateIfAbsent(key, "1")));
  ASSERT_TRUE(created.succeeded());

  server_->KillMember(leader);
  // An idempotent delete and a read, through the election.
  ASSERT_OK_AND_ASSIGN(
      auto deleted,
      client->Txn(etcd::DeleteIfCreatedAt(key, created.header().revision()),
                  {.idempotent = true}));
  EXPECT_TRUE(deleted.succeeded() || etcd::ReadKey(deleted) == nullptr);
  EXPECT_EQ(Get(*client, key), std::nullopt);
  ASSERT_OK_AND_ASSIGN(const int new_leader, server_->Leader());
  EXPECT_NE(new_leader, leader);
  EXPECT_GT(deleted.header().revision(), created.header().revision());
}

TEST_F(EtcdClusterTest, ALostReplyOfAnIdempotentTxnIsRetriedAndAppliedOnce) {
  const int member = AFollower();
  FaultProxy proxy;
  ASSERT_OK(proxy.Start("127.0.0.1", server_->client_port(member)));
  etcd::ClientOptions options = ClientOptionsFor(*server_, Starting(member));
  options.endpoints[0] = absl::StrCat("127.0.0.1:", proxy.port());
  options.attempt_timeout = absl::Milliseconds(500);
  ASSERT_OK_AND_ASSIGN(auto client, etcd::Client::Create(options));
  ASSERT_OK_AND_ASSIGN(auto direct,
                       etcd::Client::Create(ClientOptionsFor(*server_)));
  const std::string key = TestKey();
  EXPECT_EQ(Get(*client, key), std::nullopt);  // connected through the proxy

  proxy.SetFault(Direction::kReplies, Fault::Drop());
  const uint64_t dropped = proxy.stats().replies.dropped;
  const std::string value = "owner-token-and-nonce-1";
  ASSERT_OK_AND_ASSIGN(auto txn, client->Txn(etcd::CreateIfAbsent(key, value),
                                             {.idempotent = true}));
  EXPECT_GT(proxy.stats().replies.dropped, dropped) << "no reply was lost";
  // The first attempt committed; the retry found the key and read it back.
  EXPECT_FALSE(txn.succeeded());
  ASSERT_NE(etcd::ReadKey(txn), nullptr);
  EXPECT_EQ(etcd::ReadKey(txn)->value(), value);
  EXPECT_EQ(etcd::ReadKey(txn)->version(), 1) << "applied more than once";
  etcdserverpb::RangeRequest range;
  range.set_key(key);
  ASSERT_OK_AND_ASSIGN(auto read, direct->Range(range));
  ASSERT_EQ(read.kvs_size(), 1);
  EXPECT_EQ(read.kvs(0).mod_revision(), read.kvs(0).create_revision());
}

TEST_F(EtcdClusterTest, AWriteThatIsNotIdempotentIsNotRetriedAfterALostReply) {
  const int member = AFollower();
  FaultProxy proxy;
  ASSERT_OK(proxy.Start("127.0.0.1", server_->client_port(member)));
  etcd::ClientOptions options = ClientOptionsFor(*server_, Starting(member));
  options.endpoints[0] = absl::StrCat("127.0.0.1:", proxy.port());
  ASSERT_OK_AND_ASSIGN(auto client, etcd::Client::Create(options));
  ASSERT_OK_AND_ASSIGN(auto direct,
                       etcd::Client::Create(ClientOptionsFor(*server_)));
  const std::string key = TestKey();
  EXPECT_EQ(Get(*client, key), std::nullopt);  // connected through the proxy

  // The put reaches etcd and is applied; the answer is held, then the
  // connection is reset: the client sees a broken connection at once, with
  // plenty of its budget left for a retry that must not happen.
  proxy.SetFault(Direction::kReplies, Fault::Stall());
  std::thread reset([&] {
    EXPECT_TRUE(Eventually([&] { return Get(*direct, key).has_value(); }))
        << "the put never reached etcd";
    proxy.ResetAll();
  });
  etcdserverpb::PutRequest put;
  put.set_key(key);
  put.set_value("applied, but nobody heard");
  const absl::StatusOr<etcdserverpb::PutResponse> response = client->Put(put);
  reset.join();
  EXPECT_CODE(response, kUnavailable);
  EXPECT_TRUE(etcd::IsOutcomeUnknown(response.status())) << response.status();
  // Not a failure: it committed, once.
  etcdserverpb::RangeRequest range;
  range.set_key(key);
  ASSERT_OK_AND_ASSIGN(auto read, direct->Range(range));
  ASSERT_EQ(read.kvs_size(), 1);
  EXPECT_EQ(read.kvs(0).value(), "applied, but nobody heard");
  EXPECT_EQ(read.kvs(0).version(), 1) << "the put was applied twice";
}

TEST_F(EtcdClusterTest, AWriteWithoutQuorumIsToldUnknown) {
  ASSERT_OK_AND_ASSIGN(const int leader, server_->Leader());
  for (int i = 0; i < server_->size(); ++i) {
    if (i != leader) server_->PauseMember(i);
  }
  etcd::ClientOptions options = ClientOptionsFor(*server_, {leader});
  options.call_timeout = absl::Seconds(10);
  ASSERT_OK_AND_ASSIGN(auto client, etcd::Client::Create(options));
  etcdserverpb::PutRequest put;
  put.set_key(TestKey());
  put.set_value("proposed, never committed");
  // etcd proposes it and answers "request timed out" (or "leader changed",
  // or nothing) once it gives up: the client cannot know.
  const absl::StatusOr<etcdserverpb::PutResponse> response = client->Put(put);
  EXPECT_CODE(response, kUnavailable);
  EXPECT_TRUE(etcd::IsOutcomeUnknown(response.status())) << response.status();
}

}  // namespace
}  // namespace dlock::test
