// Copyright dlock authors. The etcd client's calls against one real etcd
// (Debian's etcd-server): KV, leases and their keepalives, watches (events,
// cancel, a compacted start revision).
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "etcd_client_test_util.h"

namespace dlock::test {
namespace {

using etcd::WatchUpdate;

class EtcdClientTest : public EtcdClientSuite<EtcdClientTest> {
 public:
  static EtcdServer::Options ServerOptions() { return {}; }
};

TEST_F(EtcdClientTest, PutRangeAndDeleteRange) {
  const std::string key = TestKey();
  const int64_t revision = MustPut(*client_, key + "/a", "1");
  MustPut(*client_, key + "/b", "2");
  EXPECT_EQ(Get(*client_, key + "/a"), "1");

  etcdserverpb::RangeRequest range;
  range.set_key(key + "/");
  range.set_range_end(etcd::PrefixEnd(key + "/"));
  ASSERT_OK_AND_ASSIGN(auto listed, client_->Range(range));
  ASSERT_EQ(listed.kvs_size(), 2);
  EXPECT_EQ(listed.kvs(0).create_revision(), revision);

  etcdserverpb::DeleteRangeRequest remove;
  remove.set_key(key + "/");
  remove.set_range_end(etcd::PrefixEnd(key + "/"));
  ASSERT_OK_AND_ASSIGN(auto removed, client_->DeleteRange(remove));
  EXPECT_EQ(removed.deleted(), 2);
  EXPECT_EQ(Get(*client_, key + "/a"), std::nullopt);
}

TEST_F(EtcdClientTest, CreateIfAbsentCreatesOnceAndReadsTheHolderAfter) {
  const std::string key = TestKey();
  ASSERT_OK_AND_ASSIGN(auto created,
                       client_->Txn(etcd::CreateIfAbsent(key, "first")));
  EXPECT_TRUE(created.succeeded());
  ASSERT_OK_AND_ASSIGN(auto again,
                       client_->Txn(etcd::CreateIfAbsent(key, "second")));
  EXPECT_FALSE(again.succeeded());
  const mvccpb::KeyValue* holder = etcd::ReadKey(again);
  ASSERT_NE(holder, nullptr);
  EXPECT_EQ(holder->value(), "first");
  EXPECT_EQ(holder->create_revision(), created.header().revision());
  EXPECT_EQ(holder->version(), 1);
}

TEST_F(EtcdClientTest, DeleteIfCreatedAtSparesANewerKeyOfTheSameName) {
  const std::string key = TestKey();
  ASSERT_OK_AND_ASSIGN(auto first,
                       client_->Txn(etcd::CreateIfAbsent(key, "v")));
  const int64_t first_revision = first.header().revision();
  ASSERT_OK_AND_ASSIGN(
      auto deleted, client_->Txn(etcd::DeleteIfCreatedAt(key, first_revision)));
  EXPECT_TRUE(deleted.succeeded());
  // The same owner creates the key again (same value): a late retry of the
  // first delete must not remove it (etcd #22082).
  ASSERT_OK_AND_ASSIGN(auto second,
                       client_->Txn(etcd::CreateIfAbsent(key, "v")));
  ASSERT_TRUE(second.succeeded());
  ASSERT_OK_AND_ASSIGN(
      auto retried, client_->Txn(etcd::DeleteIfCreatedAt(key, first_revision)));
  EXPECT_FALSE(retried.succeeded());
  ASSERT_NE(etcd::ReadKey(retried), nullptr);
  EXPECT_EQ(etcd::ReadKey(retried)->create_revision(),
            second.header().revision());
  EXPECT_EQ(Get(*client_, key), "v");
}

TEST_F(EtcdClientTest, LeaseGrantTimeToLiveAndRevokeDeletesItsKeys) {
  const std::string key = TestKey();
  ASSERT_OK_AND_ASSIGN(auto lease, client_->LeaseGrant(absl::Seconds(30)));
  EXPECT_EQ(lease.ttl(), 30);
  MustPut(*client_, key, "leased", lease.id());
  ASSERT_OK_AND_ASSIGN(auto alive, client_->LeaseTimeToLive(lease.id(), true));
  EXPECT_GT(alive.ttl(), 0);
  EXPECT_EQ(alive.grantedttl(), 30);
  ASSERT_EQ(alive.keys_size(), 1);
  EXPECT_EQ(alive.keys(0), key);

  ASSERT_OK(client_->LeaseRevoke(lease.id()));
  EXPECT_EQ(Get(*client_, key), std::nullopt);
  ASSERT_OK_AND_ASSIGN(auto gone, client_->LeaseTimeToLive(lease.id()));
  EXPECT_EQ(gone.ttl(), -1);
  EXPECT_CODE(client_->LeaseRevoke(lease.id()), kNotFound);
  EXPECT_CODE(client_->LeaseGrant(absl::Milliseconds(500)), kInvalidArgument);
}

TEST_F(EtcdClientTest, ALeaseNobodyKeepsExpiresAndAWatchSeesItsKeyDeleted) {
  const std::string key = TestKey();
  ASSERT_OK_AND_ASSIGN(auto lease, client_->LeaseGrant(absl::Seconds(1)));
  const int64_t revision = MustPut(*client_, key, "short", lease.id());
  WatchRecorder recorder;
  auto watch = client_->StartWatch({.key = key, .start_revision = revision + 1},
                                   recorder.Callback());
  ASSERT_TRUE(recorder.WaitEvents(1, absl::Seconds(10)))
      << "the lease's key was not deleted";
  const std::vector<mvccpb::Event> events = recorder.Events();
  EXPECT_EQ(events[0].type(), mvccpb::Event::DELETE);
  EXPECT_EQ(events[0].kv().key(), key);
  ASSERT_OK_AND_ASSIGN(auto gone, client_->LeaseTimeToLive(lease.id()));
  EXPECT_EQ(gone.ttl(), -1);
}

TEST_F(EtcdClientTest, AKeptLeaseOutlivesItsTtlAndOneForgottenExpires) {
  const std::string key = TestKey();
  ASSERT_OK_AND_ASSIGN(auto lease, client_->LeaseGrant(absl::Seconds(1)));
  MustPut(*client_, key, "kept", lease.id());
  const absl::Time kept_from = etcd::MonotonicNow();
  client_->leases().Keep(lease.id(), absl::Milliseconds(300), [] {});
  absl::SleepFor(absl::Milliseconds(2500));  // 2.5 TTLs
  EXPECT_EQ(Get(*client_, key), "kept");
  const std::optional<absl::Time> until =
      client_->leases().KnownAliveUntil(lease.id());
  ASSERT_TRUE(until.has_value());
  EXPECT_GT(*until, kept_from + absl::Seconds(2));
  EXPECT_EQ(client_->leases().streams_opened(), 1);

  client_->leases().Forget(lease.id());
  WatchRecorder recorder;
  auto watch = client_->StartWatch({.key = key}, recorder.Callback());
  EXPECT_TRUE(recorder.WaitEvents(1, absl::Seconds(10)))
      << "a lease no longer kept did not expire";
}

TEST_F(EtcdClientTest, KeepAliveOnceRenewsAndSaysWhenTheLeaseIsGone) {
  ASSERT_OK_AND_ASSIGN(auto lease, client_->LeaseGrant(absl::Seconds(5)));
  ASSERT_OK_AND_ASSIGN(
      absl::Duration ttl,
      client_->leases().KeepAliveOnce(lease.id(),
                                      etcd::MonotonicNow() + absl::Seconds(5)));
  EXPECT_EQ(ttl, absl::Seconds(5));
  ASSERT_OK(client_->LeaseRevoke(lease.id()));
  EXPECT_CODE(client_->leases().KeepAliveOnce(
                  lease.id(), etcd::MonotonicNow() + absl::Seconds(5)),
              kNotFound);
}

// A watchdog round: every keepalive sent before any answer is awaited, one
// result per lease in order, a gone lease told as such among live ones.
TEST_F(EtcdClientTest, KeepAliveEachAnswersEveryLeaseInOrder) {
  std::vector<int64_t> leases;
  for (int i = 0; i < 50; ++i) {
    ASSERT_OK_AND_ASSIGN(auto lease,
                         client_->LeaseGrant(absl::Seconds(5 + i % 3)));
    leases.push_back(lease.id());
  }
  ASSERT_OK(client_->LeaseRevoke(leases[17]));
  const std::vector<absl::StatusOr<absl::Duration>> ttls =
      client_->leases().KeepAliveEach(leases,
                                      etcd::MonotonicNow() + absl::Seconds(5));
  ASSERT_EQ(ttls.size(), leases.size());
  for (int i = 0; i < 50; ++i) {
    if (i == 17) {
      EXPECT_CODE(ttls[i], kNotFound);
    } else {
      ASSERT_OK(ttls[i]);
      EXPECT_EQ(*ttls[i], absl::Seconds(5 + i % 3)) << i;
    }
  }
}

TEST_F(EtcdClientTest, AKeptLeaseRevokedElsewhereIsToldGoneOnce) {
  ASSERT_OK_AND_ASSIGN(auto lease, client_->LeaseGrant(absl::Seconds(5)));
  absl::Mutex mu;
  int gone = 0;
  client_->leases().Keep(lease.id(), absl::Milliseconds(200), [&] {
    absl::MutexLock lock(&mu);
    ++gone;
  });
  ASSERT_OK(client_->LeaseRevoke(lease.id()));
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                      +[](int* n) { return *n > 0; }, &gone),
                                  absl::Seconds(5)));
  mu.Unlock();
  absl::SleepFor(absl::Milliseconds(600));  // three more keepalive periods
  mu.Lock();
  EXPECT_EQ(gone, 1);
}

TEST_F(EtcdClientTest, AWatchTellsPutsAndDeletesInOrder) {
  const std::string prefix = TestKey("/");
  WatchRecorder recorder;
  auto watch = client_->StartWatch(
      {.key = prefix, .range_end = etcd::PrefixEnd(prefix), .prev_kv = true},
      recorder.Callback());
  ASSERT_TRUE(recorder.WaitStarted());
  EXPECT_EQ(recorder.updates()[0].kind, WatchUpdate::Kind::kStarted);
  MustPut(*client_, prefix + "a", "1");
  const int64_t last = MustPut(*client_, prefix + "b", "2");
  etcdserverpb::DeleteRangeRequest remove;
  remove.set_key(prefix + "a");
  ASSERT_OK(client_->DeleteRange(remove));

  ASSERT_TRUE(recorder.WaitEvents(3));
  const std::vector<mvccpb::Event> events = recorder.Events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type(), mvccpb::Event::PUT);
  EXPECT_EQ(events[0].kv().key(), prefix + "a");
  EXPECT_EQ(events[1].kv().mod_revision(), last);
  EXPECT_EQ(events[2].type(), mvccpb::Event::DELETE);
  EXPECT_EQ(events[2].prev_kv().value(), "1");
  EXPECT_EQ(watch->next_revision(), last + 2);
}

TEST_F(EtcdClientTest, ACancelledWatchTellsNothingMore) {
  const std::string key = TestKey();
  WatchRecorder cancelled;
  auto watch = client_->StartWatch({.key = key}, cancelled.Callback());
  ASSERT_TRUE(cancelled.WaitStarted());
  watch->Cancel();
  const size_t told = cancelled.updates().size();

  // A second watch of the key sees the put; by then the first would have.
  WatchRecorder witness;
  auto second = client_->StartWatch({.key = key}, witness.Callback());
  ASSERT_TRUE(witness.WaitStarted());
  MustPut(*client_, key, "after the cancel");
  ASSERT_TRUE(witness.WaitEvents(1));
  EXPECT_EQ(cancelled.updates().size(), told);
}

TEST_F(EtcdClientTest, AWatchFromACompactedRevisionSaysSoAndGoesOn) {
  const std::string key = TestKey();
  const int64_t first = MustPut(*client_, key, "1");
  MustPut(*client_, key, "2");
  const int64_t kept = MustPut(*client_, key, "3");
  const int64_t last = MustPut(*client_, key, "4");
  ASSERT_OK(server_->Compact(kept));

  WatchRecorder recorder;
  auto watch = client_->StartWatch({.key = key, .start_revision = first + 1},
                                   recorder.Callback());
  ASSERT_TRUE(recorder.WaitEvents(2));
  const std::vector<WatchUpdate> updates = recorder.updates();
  auto compacted = std::find_if(updates.begin(), updates.end(), [](auto& u) {
    return u.kind == WatchUpdate::Kind::kCompacted;
  });
  ASSERT_NE(compacted, updates.end()) << "the gap was not told";
  EXPECT_EQ(compacted->revision, kept);
  const std::vector<mvccpb::Event> events = recorder.Events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kv().mod_revision(), kept);
  EXPECT_EQ(events[1].kv().mod_revision(), last);
}

TEST_F(EtcdClientTest, ACallToNoServerFailsNamingTheEndpointsInTime) {
  etcd::ClientOptions options;
  options.endpoints = {"127.0.0.1:1", "127.0.0.1:2"};
  options.call_timeout = absl::Seconds(1);
  ASSERT_OK_AND_ASSIGN(auto client, etcd::Client::Create(options));
  const absl::Time start = absl::Now();
  absl::StatusOr<etcdserverpb::PutResponse> put =
      client->Put(etcdserverpb::PutRequest());
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_CODE(put, kUnavailable);
  EXPECT_TRUE(absl::StrContains(put.status().message(), "127.0.0.1:1"))
      << put.status();
  EXPECT_TRUE(absl::StrContains(put.status().message(), "127.0.0.1:2"))
      << put.status();
  // Nobody was reached: the put was certainly not applied.
  EXPECT_FALSE(etcd::IsOutcomeUnknown(put.status())) << put.status();
}

// A client whose member was down for a while finds it back within a
// couple of seconds of its restart (a connection attempt that met the
// member starting up waited out gRPC's 20 s), and a call meanwhile fails
// within its deadline. Last: it restarts the suite's server.
TEST_F(EtcdClientTest, AClientFindsARestartedMemberPromptly) {
  const std::string key = TestKey();
  MustPut(*client_, key, "before");
  server_->StopAll();
  etcdserverpb::RangeRequest range;
  range.set_key(key);
  const absl::Time start = absl::Now();
  // Its budget is 5 s; a cluster that refuses every connection fails it
  // at once.
  EXPECT_CODE(client_->Range(range), kUnavailable);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  absl::SleepFor(absl::Seconds(4));  // failed attempts back off meanwhile
  ASSERT_OK(server_->StartAll());
  const absl::Time started = absl::Now();
  absl::StatusOr<etcdserverpb::RangeResponse> read;
  while (absl::Now() - started < absl::Seconds(20)) {
    read = client_->Range(
        range, {.deadline = etcd::MonotonicNow() + absl::Milliseconds(500)});
    if (read.ok()) break;
  }
  ASSERT_OK(read);
  EXPECT_LT(absl::Now() - started, absl::Seconds(3));
  EXPECT_EQ(read->kvs_size(), 1);
}

}  // namespace
}  // namespace dlock::test
