// Copyright dlock authors. Waiters contending through a failover (issue 19
// §6, docs/semantics.md "Riding out a failover"): worker threads, each with a
// client of its own (as separate `dlock run --wait 60s` processes would
// have), take the lock with Acquire(wait) over and over, hold it briefly and
// release it, while the test kills the master or leader. What a test checks
// afterwards: no acquire returned an error, no two tenures overlapped, and
// the fencing tokens rose with every grant.
#ifndef DLOCK_TESTS_FAULTS_FAILOVER_CONTENTION_H_
#define DLOCK_TESTS_FAULTS_FAILOVER_CONTENTION_H_

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"

namespace dlock::test {

struct ContentionOptions {
  int workers = 4;
  absl::Duration wait = absl::Seconds(60);  // each Acquire's wait
  absl::Duration hold = absl::Milliseconds(100);
  // The watchdog renews at a third of it: a hold of `hold` never needs it.
  absl::Duration lease = absl::Seconds(3);
  std::string lock_name = "ridden through a failover";
};

// What a run saw. Times are from the moment the test marked the fault.
struct ContentionReport {
  int grants = 0;
  int grants_after_fault = 0;
  std::vector<std::string> acquire_errors;  // "worker N: <status>"
  int release_errors = 0;
  int overlaps = 0;
  int token_regressions = 0;
  absl::Duration longest_acquire;  // the longest Acquire() call that returned
  absl::Duration first_grant_after_fault = absl::InfiniteDuration();
  std::string Summary() const {
    return absl::StrCat(
        "grants ", grants, " (", grants_after_fault,
        " after the fault, the first ",
        absl::FormatDuration(
            absl::Trunc(first_grant_after_fault, absl::Milliseconds(1))),
        " after it), acquire errors ", acquire_errors.size(),
        acquire_errors.empty()
            ? ""
            : absl::StrCat(" (the first: ", acquire_errors.front(),
                           "; the last: ", acquire_errors.back(), ")"),
        ", release errors ", release_errors, ", overlaps ", overlaps,
        ", token regressions ", token_regressions, ", longest acquire ",
        absl::FormatDuration(
            absl::Trunc(longest_acquire, absl::Milliseconds(1))));
  }
};

// What every failover test asserts of its run: no acquire with a wait
// returned an error, no two tenures overlapped, the tokens rose, and the
// workers went on getting the lock after the fault.
inline void ExpectRodeOut(const ContentionReport& report,
                          int min_grants_after_fault) {
  EXPECT_TRUE(report.acquire_errors.empty()) << report.Summary();
  EXPECT_EQ(report.overlaps, 0) << report.Summary();
  EXPECT_EQ(report.token_regressions, 0) << report.Summary();
  EXPECT_GE(report.grants_after_fault, min_grants_after_fault)
      << report.Summary();
}

class Contention {
 public:
  // Starts the workers; worker i connects to uri_of(i).
  Contention(std::function<std::string(int)> uri_of, ContentionOptions options)
      : options_(std::move(options)) {
    for (int i = 0; i < options_.workers; ++i) {
      workers_.emplace_back([this, i, uri = uri_of(i)] { Work(i, uri); });
    }
  }
  ~Contention() { Stop(); }

  // Waits until `count` grants were recorded, or `timeout`; whether they
  // were.
  bool WaitForGrants(int count, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return static_cast<int>(tenures_.size()) >= count;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }
  int grants() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(tenures_.size());
  }
  // The fault starts now: grants from here on count as after it.
  void MarkFault() {
    absl::MutexLock lock(&mu_);
    fault_at_ = absl::Now();
  }

  ContentionReport Stop() {
    stop_ = true;
    stopping_.Cancel();  // ends the waits under way
    for (std::thread& t : workers_) {
      if (t.joinable()) t.join();
    }
    absl::MutexLock lock(&mu_);
    report_.grants = static_cast<int>(tenures_.size());
    std::vector<Tenure> by_grant = tenures_;
    std::sort(by_grant.begin(), by_grant.end(),
              [](const Tenure& a, const Tenure& b) { return a.from < b.from; });
    for (size_t i = 0; i < by_grant.size(); ++i) {
      if (by_grant[i].from >= fault_at_) {
        ++report_.grants_after_fault;
        report_.first_grant_after_fault = std::min(
            report_.first_grant_after_fault, by_grant[i].from - fault_at_);
      }
      if (i == 0) continue;
      if (by_grant[i - 1].until > by_grant[i].from) ++report_.overlaps;
      if (by_grant[i].token <= by_grant[i - 1].token) {
        ++report_.token_regressions;
      }
    }
    return report_;
  }

 private:
  // When one grant was believed held: from the grant to just before its
  // release.
  struct Tenure {
    uint64_t token = 0;
    absl::Time from;
    absl::Time until;
  };

  void Work(int i, const std::string& uri) {
    ClientOptions client_options;
    client_options.watchdog_lease = options_.lease;
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        Connect(uri, client_options);
    absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
        client.ok()
            ? (*client)->GetLock(options_.lock_name)
            : absl::StatusOr<std::unique_ptr<DistributedLock>>(client.status());
    if (!lock.ok()) {
      Error(i, lock.status());
      return;
    }
    while (!stop_) {
      AcquireOptions acquire;
      acquire.wait = options_.wait;
      acquire.cancel = stopping_;
      const absl::Time asked = absl::Now();
      absl::StatusOr<Hold> hold = (*lock)->Acquire(acquire);
      const absl::Time granted = absl::Now();
      {
        absl::MutexLock l(&mu_);
        report_.longest_acquire =
            std::max(report_.longest_acquire, granted - asked);
      }
      if (!hold.ok()) {
        if (stop_) break;
        Error(i, hold.status());
        absl::SleepFor(absl::Milliseconds(100));
        continue;
      }
      absl::SleepFor(options_.hold);
      const absl::Time until = absl::Now();
      {
        absl::MutexLock l(&mu_);
        tenures_.push_back(Tenure{hold->fencing_token(), granted, until});
      }
      if (!hold->Release().ok()) {
        absl::MutexLock l(&mu_);
        ++report_.release_errors;
      }
    }
  }

  void Error(int i, const absl::Status& s) {
    absl::MutexLock lock(&mu_);
    report_.acquire_errors.push_back(
        absl::StrCat("worker ", i, ": ", s.ToString()));
  }

  const ContentionOptions options_;
  std::atomic<bool> stop_{false};
  CancelToken stopping_;
  std::vector<std::thread> workers_;
  absl::Mutex mu_;
  std::vector<Tenure> tenures_ ABSL_GUARDED_BY(mu_);
  ContentionReport report_ ABSL_GUARDED_BY(mu_);
  absl::Time fault_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_FAULTS_FAILOVER_CONTENTION_H_
