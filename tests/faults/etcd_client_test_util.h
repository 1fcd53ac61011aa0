// Copyright dlock authors. What the tests of the etcd client share: a client
// for a test server, and a recorder of what a watch told.
#ifndef DLOCK_TESTS_FAULTS_ETCD_CLIENT_TEST_UTIL_H_
#define DLOCK_TESTS_FAULTS_ETCD_CLIENT_TEST_UTIL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd_client.h"
#include "etcd_lease_keeper.h"
#include "etcd_server.h"
#include "etcd_server_suite.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock::test {

// Options for a client of `server`'s members, in the order given (every
// member when `members` is empty), with its TLS files when it has TLS.
inline etcd::ClientOptions ClientOptionsFor(const EtcdServer& server,
                                            std::vector<int> members = {}) {
  etcd::ClientOptions options;
  if (members.empty()) {
    options.endpoints = server.Endpoints();
  } else {
    for (int i : members) {
      options.endpoints.push_back(server.Endpoints()[i]);
    }
  }
  return options;
}

// A key of its own for each test, so that tests sharing a server do not
// see each other's keys.
inline std::string TestKey(const std::string& suffix = "") {
  const ::testing::TestInfo* test =
      ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string("/dlock/") + test->test_suite_name() + "/" + test->name() +
         suffix;
}

// A suite of `Suite`'s etcd whose every test gets a client of its own.
template <typename Suite>
class EtcdClientSuite : public EtcdServerSuite<Suite> {
 protected:
  void SetUp() override {
    EtcdServerSuite<Suite>::SetUp();
    if (this->HasFatalFailure()) return;
    ASSERT_OK_AND_ASSIGN(client_, etcd::Client::Create(ClientOptionsFor(
                                      *EtcdServerSuite<Suite>::server_)));
  }

  std::unique_ptr<etcd::Client> client_;
};

class WatchRecorder {
 public:
  etcd::Watch::Callback Callback() {
    return [this](const etcd::WatchUpdate& update) {
      absl::MutexLock lock(&mu_);
      updates_.push_back(update);
    };
  }

  // True once `done(updates so far)` holds; false after `timeout`.
  bool WaitFor(
      const std::function<bool(const std::vector<etcd::WatchUpdate>&)>& done,
      absl::Duration timeout = absl::Seconds(10)) {
    absl::MutexLock lock(&mu_);
    auto ready = [&] {
      mu_.AssertHeld();  // the condition runs under mu_
      return done(updates_);
    };
    return mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  }
  bool WaitStarted() {
    return WaitFor([](const std::vector<etcd::WatchUpdate>& updates) {
      return !updates.empty();
    });
  }
  // True once `n` events were told.
  bool WaitEvents(size_t n, absl::Duration timeout = absl::Seconds(10)) {
    return WaitFor(
        [n](const std::vector<etcd::WatchUpdate>& updates) {
          return CountEvents(updates) >= n;
        },
        timeout);
  }

  std::vector<etcd::WatchUpdate> updates() {
    absl::MutexLock lock(&mu_);
    return updates_;
  }
  std::vector<mvccpb::Event> Events() {
    std::vector<mvccpb::Event> events;
    for (const etcd::WatchUpdate& update : updates()) {
      events.insert(events.end(), update.events.begin(), update.events.end());
    }
    return events;
  }

 private:
  static size_t CountEvents(const std::vector<etcd::WatchUpdate>& updates) {
    size_t n = 0;
    for (const etcd::WatchUpdate& update : updates) n += update.events.size();
    return n;
  }

  absl::Mutex mu_;
  std::vector<etcd::WatchUpdate> updates_ ABSL_GUARDED_BY(mu_);
};

// A put of `key`=`value`, failing the test if it fails; its revision.
inline int64_t MustPut(etcd::Client& client, const std::string& key,
                       const std::string& value, int64_t lease = 0) {
  etcdserverpb::PutRequest put;
  put.set_key(key);
  put.set_value(value);
  put.set_lease(lease);
  absl::StatusOr<etcdserverpb::PutResponse> response = client.Put(put);
  EXPECT_OK(response);
  return response.ok() ? response->header().revision() : 0;
}

// The key's value, or nullopt when it does not exist.
inline std::optional<std::string> Get(etcd::Client& client,
                                      const std::string& key) {
  etcdserverpb::RangeRequest range;
  range.set_key(key);
  absl::StatusOr<etcdserverpb::RangeResponse> response = client.Range(range);
  EXPECT_OK(response);
  if (!response.ok() || response->kvs_size() == 0) return std::nullopt;
  return response->kvs(0).value();
}

}  // namespace dlock::test

#endif  // DLOCK_TESTS_FAULTS_ETCD_CLIENT_TEST_UTIL_H_
