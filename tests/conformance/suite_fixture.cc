// Copyright dlock authors. The shared parts of the conformance suite declared
// in conformance_fixture.h (compiled with the suite's cases).
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "conformance_fixture.h"
#include "server_process.h"
#include "test_servers_gtest.h"

namespace dlock::test {

bool Eventually(absl::FunctionRef<bool()> condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (condition()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

absl::StatusOr<uint64_t> HeldToken(const std::string& log) {
  uint64_t token = 0;
  absl::Status held = WaitUntil(
      [&] {
        const std::string out = FileTail(log);
        const size_t at = out.find("HELD ");
        if (at == std::string::npos) return false;
        absl::string_view rest = absl::string_view(out).substr(at + 5);
        return absl::SimpleAtoi(rest.substr(0, rest.find('\n')), &token);
      },
      kNoHang, "the lock holder printing HELD", log);
  if (!held.ok()) return held;
  return token;
}

std::thread CancelAfter(CancelToken cancel, absl::Duration after) {
  return std::thread([cancel, after] {
    absl::SleepFor(after);
    cancel.Cancel();
  });
}

AcquireOptions WithLease(absl::Duration lease, absl::Duration wait) {
  AcquireOptions options;
  options.lease = lease;
  options.wait = wait;
  return options;
}

AcquireOptions AsOwner(std::string owner_token, absl::Duration lease) {
  AcquireOptions options = WithLease(lease);
  options.owner_token = std::move(owner_token);
  return options;
}

absl::StatusOr<std::optional<std::set<std::string>>> ListedNames(
    LockClient& client, absl::string_view prefix) {
  absl::StatusOr<std::vector<LockInfo>> listed = client.Admin().List(prefix);
  if (listed.status().code() == absl::StatusCode::kUnimplemented) {
    ::testing::Test::RecordProperty("list", "unimplemented by this backend");
    return std::optional<std::set<std::string>>();
  }
  if (!listed.ok()) return listed.status();
  std::set<std::string> names;
  for (const LockInfo& info : *listed) names.insert(info.name);
  return std::optional<std::set<std::string>>(std::move(names));
}

// --- LostRecorder -----------------------------------------------------------

LostRecorder::LostRecorder() : record_(std::make_shared<Record>()) {}

LockLostCallback LostRecorder::Callback() const {
  return [record = record_](const LockLostEvent& event) {
    absl::MutexLock lock(&record->mu);
    record->events.push_back(event);
  };
}

bool LostRecorder::WaitForEvents(size_t count, absl::Duration timeout) const {
  absl::MutexLock lock(&record_->mu);
  const Record* record = record_.get();
  auto enough = [record, count]() ABSL_SHARED_LOCKS_REQUIRED(record->mu) {
    return record->events.size() >= count;
  };
  return record_->mu.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

std::vector<LockLostEvent> LostRecorder::Events() const {
  absl::MutexLock lock(&record_->mu);
  return record_->events;
}

size_t SettledEvents(const LostRecorder& lost) {
  absl::SleepFor(kLetWaiterBlock);
  return lost.Events().size();
}

// --- BackgroundAcquire ------------------------------------------------------

BackgroundAcquire::BackgroundAcquire(DistributedLock& lock,
                                     AcquireOptions options)
    : cancel_(options.cancel), result_(absl::UnknownError("still waiting")) {
  thread_ = std::thread([this, &lock, options = std::move(options)] {
    absl::StatusOr<Hold> hold = lock.Acquire(options);
    const absl::Time at = absl::Now();
    absl::StatusOr<Granted> result;
    absl::Status released;
    if (hold.ok()) {
      result = Granted{.fencing_token = hold->fencing_token(),
                       .hold_count = hold->hold_count()};
      released = hold->Release();
    } else {
      result = hold.status();
    }
    absl::MutexLock guard(&mu_);
    result_ = std::move(result);
    done_at_ = at;
    release_status_ = std::move(released);
    done_ = true;
  });
}

BackgroundAcquire::~BackgroundAcquire() {
  cancel_.Cancel();
  thread_.join();
}

bool BackgroundAcquire::WaitDone(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
}

bool BackgroundAcquire::done() {
  absl::MutexLock lock(&mu_);
  return done_;
}

absl::StatusOr<Granted> BackgroundAcquire::result() {
  absl::MutexLock lock(&mu_);
  return result_;
}

absl::Time BackgroundAcquire::done_at() {
  absl::MutexLock lock(&mu_);
  return done_at_;
}

absl::Status BackgroundAcquire::release_status() {
  absl::MutexLock lock(&mu_);
  return release_status_;
}

// --- Conformance ------------------------------------------------------------

std::string LockHolderPath() {
  if (const char* path = std::getenv("DLOCK_LOCK_HOLDER"); path && *path) {
    return path;
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "dlock_lock_holder";
  std::string dir(self, n);
  return dir.substr(0, dir.rfind('/') + 1) + "dlock_lock_holder";
}

namespace {

// Namespaces allow letters, digits, '.', '_' and '-', up to 64 bytes.
std::string NamespaceFor(absl::string_view case_name) {
  std::string ns;
  for (char c : case_name.substr(0, 40)) {
    ns.push_back(absl::ascii_isalnum(c) || c == '_' || c == '-' ? c : '-');
  }
  std::random_device random;
  absl::StrAppend(&ns, "-", absl::Hex(random(), absl::kZeroPad8));
  return ns;
}

}  // namespace

std::string Conformance::CaseName() {
  std::string name =
      ::testing::UnitTest::GetInstance()->current_test_info()->name();
  return name.substr(0, name.find('/'));
}

void Conformance::SetUp() {
  ns_ = NamespaceFor(CaseName());
  if (backend().conformance_deviations.count(CaseName()) > 0) {
    GTEST_SKIP() << "documented deviation: see docs/backends.md";
  }
}

std::string Conformance::OtherNamespace(absl::string_view tag) const {
  return absl::StrCat(ns_, ".", tag);
}

std::string Conformance::UriIn(const std::string& lock_namespace) const {
  return UriForTest(backend(), lock_namespace);
}

absl::StatusOr<std::unique_ptr<LockClient>> Conformance::NewClient(
    ClientOptions options) const {
  return NewClientIn(ns_, std::move(options));
}

absl::StatusOr<std::unique_ptr<LockClient>> Conformance::NewClientIn(
    const std::string& lock_namespace, ClientOptions options) const {
  return Connect(UriIn(lock_namespace), options);
}

std::string Conformance::MissingCapability(absl::string_view capability) const {
  return absl::StrCat(
      "backend '", backend().label, "' has no ", capability,
      ": either give its registry entry (integration/", backend().backend,
      "_registration.cc) one, or list '", CaseName(),
      "' in its conformance_deviations and in docs/backends.md");
}

ClientOptions SlowPollOptions() {
  ClientOptions options;
  options.fallback_poll = kSlowFallbackPoll;
  return options;
}

}  // namespace dlock::test
