#include "history_run.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace dlock::test {
namespace {

constexpr char kFakeTime[] =
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

// The worker program: DLOCK_HISTORY_WORKER (set by ctest), else next to
// this test binary.
std::string WorkerPath() {
  if (const char* path = std::getenv("DLOCK_HISTORY_WORKER"); path && *path) {
    return path;
  }
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "dlock_history_worker";
  const std::string exe(self, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/') + 1) + "dlock_history_worker";
}

std::string EventsPath(const std::string& dir, int i) {
  return absl::StrCat(dir, "/worker-", i, ".events");
}

}  // namespace

HistoryProfile CurrentHistoryProfile() {
  const char* p = std::getenv("DLOCK_HISTORY_PROFILE");
  if (p != nullptr && std::string(p) == "long") {
    return HistoryProfile{.workers = 5,
                          .rounds = 3,
                          .fault = absl::Seconds(4),
                          .long_profile = true};
  }
  return HistoryProfile{};
}

int RunOptions::Cells() const {
  std::vector<absl::string_view> spec = absl::StrSplit(primitive, ':');
  int cells = 0;
  if (spec.size() < 2 || (spec[0] != "semaphore" && spec[0] != "multi") ||
      !absl::SimpleAtoi(spec[1], &cells)) {
    return 0;
  }
  return cells;
}

std::string RunOptions::PrimitiveOf(int i) const {
  if (primitive != "rw") return primitive;
  return i < readers ? "read" : "write";
}

int64_t MonoNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

absl::StatusOr<std::unique_ptr<HistoryRun>> HistoryRun::Start(
    const std::string& name, RunOptions options) {
  std::unique_ptr<HistoryRun> run(new HistoryRun(std::move(options)));
  const RunOptions& o = run->options_;
  const std::string worker = WorkerPath();
  if (access(worker.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(worker,
                     " is missing: build dlock_history_worker, or set "
                     "DLOCK_HISTORY_WORKER"));
  }
  if (o.fake_wall_clock_of_worker0) {
    if (absl::Status s = RequireExecutable("/usr/bin/env", "coreutils");
        !s.ok()) {
      return s;
    }
    if (access(kFakeTime, R_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(kFakeTime,
                       " is missing: install it with `apt-get install -y "
                       "libfaketime` (scripts/install-deps.sh does this)"));
    }
  }
  absl::StatusOr<std::string> dir =
      MakeTempDir(absl::StrCat("dlock-history-", name));
  if (!dir.ok()) return dir.status();
  run->dir_ = *dir;
  std::random_device random;
  // Namespaces hold at most 64 bytes; the name goes to the directory.
  run->ns_ = absl::StrCat("history-", random() % 1000000000);
  absl::StatusOr<std::unique_ptr<RegisterServer>> reg = RegisterServer::Start();
  if (!reg.ok()) return reg.status();
  run->register_ = *std::move(reg);
  if (o.fake_wall_clock_of_worker0) {
    if (absl::Status s = run->SetWallClockOffset(absl::ZeroDuration());
        !s.ok()) {
      return s;
    }
  }

  run->killed_at_.assign(o.workers, -1);
  run->paused_at_.assign(o.workers, -1);
  run->pauses_.resize(o.workers);
  for (int i = 0; i < o.workers; ++i) {
    auto proxy = std::make_unique<FaultProxy>();
    if (absl::Status s = proxy->Start(o.upstream_host, o.upstream_port);
        !s.ok()) {
      return s;
    }
    std::vector<std::string> argv;
    if (i == 0 && o.fake_wall_clock_of_worker0) {
      argv = {"/usr/bin/env", absl::StrCat("LD_PRELOAD=", kFakeTime),
              absl::StrCat("FAKETIME_TIMESTAMP_FILE=", run->dir_, "/faketime"),
              "FAKETIME_NO_CACHE=1", "DONT_FAKE_MONOTONIC=1",
              // libfaketime is preloaded before the sanitizer's runtime.
              "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0"};
    }
    // A waiter waits longer than two holds, so that it is waiting, not
    // starting over, when the lock is handed on.
    const absl::Duration wait =
        std::max(absl::Seconds(2), o.steps * absl::Milliseconds(80));
    argv.insert(argv.end(), {worker,
                             "--uri",
                             o.uri(proxy->port(), run->ns_, i),
                             "--lock",
                             "contended",
                             "--id",
                             absl::StrCat(i),
                             "--events",
                             EventsPath(run->dir_, i),
                             "--register",
                             absl::StrCat(run->register_->port()),
                             "--lease",
                             absl::FormatDuration(o.lease),
                             "--steps",
                             absl::StrCat(o.steps),
                             "--wait",
                             absl::FormatDuration(wait),
                             "--pause",
                             absl::FormatDuration(o.pause),
                             "--seconds",
                             "600s",
                             "--primitive",
                             o.PrimitiveOf(i)});
    if (o.explicit_lease) argv.push_back("--explicit-lease");
    if (i < o.shared_token_workers) {
      argv.insert(argv.end(), {"--owner-token", "shared-owner"});
    }
    auto child = std::make_unique<ChildProcess>();
    if (absl::Status s =
            child->Spawn(argv, absl::StrCat(run->dir_, "/worker-", i, ".log"));
        !s.ok()) {
      return s;
    }
    run->proxies_.push_back(std::move(proxy));
    run->workers_.push_back(std::move(child));
  }
  return run;
}

HistoryRun::~HistoryRun() {
  for (auto& w : workers_) w->Kill();
  workers_.clear();
  proxies_.clear();
  register_.reset();
  if (!dir_.empty() && std::getenv("DLOCK_HISTORY_KEEP") == nullptr) {
    RemoveTree(dir_);
  }
}

absl::Status HistoryRun::WaitForWrites(int writes, absl::Duration timeout) {
  return WaitUntil(
      [&] { return static_cast<int>(register_->Writes().size()) >= writes; },
      timeout, absl::StrCat(writes, " writes to the register"),
      absl::StrCat(dir_, "/worker-0.events"));
}

absl::StatusOr<int> HistoryRun::WaitForHolder(absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (absl::Now() < give_up) {
    for (const WorkerHistory& w : Histories()) {
      if (killed_at_[w.id] >= 0 || w.events.empty()) continue;
      const WorkerEvent& last = w.events.back();
      if (last.kind == "held" || last.kind == "increment" ||
          last.kind == "write_ok") {
        return w.id;
      }
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::DeadlineExceededError("no worker held the lock");
}

absl::StatusOr<int> HistoryRun::FaultHolder(HolderFault fault,
                                            absl::Duration duration) {
  absl::StatusOr<int> h = WaitForHolder(absl::Seconds(10));
  if (!h.ok()) return h.status();
  switch (fault) {
    case HolderFault::kKill:
      Kill(*h);
      absl::SleepFor(duration);
      break;
    case HolderFault::kPause:
      Pause(*h);
      absl::SleepFor(duration);
      Resume(*h);
      break;
    case HolderFault::kPartition:
      if (absl::Status s = proxy(*h).Partition(); !s.ok()) return s;
      absl::SleepFor(duration);
      if (absl::Status s = proxy(*h).Heal(); !s.ok()) return s;
      break;
  }
  return h;
}

int64_t HistoryRun::WaitForGrantToOthers(int other_than, int64_t since_ns,
                                         absl::Duration timeout) const {
  const absl::Time give_up = absl::Now() + timeout;
  do {
    int64_t first = -1;
    for (const WorkerHistory& w : Histories()) {
      if (w.id == other_than) continue;
      for (const WorkerEvent& e : w.events) {
        if (e.kind != "grant" || e.at_ns <= since_ns) continue;
        if (first < 0 || e.at_ns < first) first = e.at_ns;
        break;
      }
    }
    if (first >= 0) return first;
    absl::SleepFor(absl::Milliseconds(20));
  } while (absl::Now() < give_up);
  return -1;
}

void HistoryRun::Kill(int worker) {
  killed_at_[worker] = MonoNowNs();
  workers_[worker]->Kill();
}

void HistoryRun::Pause(int worker) {
  workers_[worker]->Pause();
  paused_at_[worker] = MonoNowNs();
}

void HistoryRun::Resume(int worker) {
  pauses_[worker].emplace_back(paused_at_[worker], MonoNowNs());
  workers_[worker]->Resume();
}

absl::Status HistoryRun::SetWallClockOffset(absl::Duration offset) {
  // libfaketime reads "+Ns"/"-Ns" anew on every call (FAKETIME_NO_CACHE).
  const std::string path = absl::StrCat(dir_, "/faketime");
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    const int64_t s = absl::ToInt64Seconds(offset);
    out << (s < 0 ? "" : "+") << s << "\n";
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

int HistoryRun::GrantsSince(int worker, int64_t since_ns) const {
  absl::StatusOr<std::vector<WorkerEvent>> events =
      ReadEvents(EventsPath(dir_, worker));
  int grants = 0;
  if (!events.ok()) return 0;
  for (const WorkerEvent& e : *events) {
    if (e.kind == "grant" && e.at_ns > since_ns) ++grants;
  }
  return grants;
}

void HistoryRun::Healed(absl::Duration timeout) {
  healed_at_ = MonoNowNs();
  const absl::Time give_up = absl::Now() + timeout;
  while (absl::Now() < give_up) {
    bool all = true;
    for (int i = 0; i < options_.workers && all; ++i) {
      if (killed_at_[i] < 0 && GrantsSince(i, healed_at_) == 0) all = false;
    }
    if (all) return;
    absl::SleepFor(absl::Milliseconds(50));
  }
}

std::vector<WorkerHistory> HistoryRun::Histories() const {
  std::vector<WorkerHistory> out;
  for (int i = 0; i < options_.workers; ++i) {
    WorkerHistory w;
    w.id = i;
    w.owner = i < options_.shared_token_workers ? "shared-owner"
                                                : absl::StrCat("worker-", i);
    absl::StatusOr<std::vector<WorkerEvent>> events =
        ReadEvents(EventsPath(dir_, i));
    if (events.ok()) w.events = *std::move(events);
    w.killed_at_ns = killed_at_[i];
    w.paused = pauses_[i];
    out.push_back(std::move(w));
  }
  return out;
}

HistoryReport HistoryRun::Finish() {
  std::vector<std::string> exit_problems;
  for (int i = 0; i < options_.workers; ++i) {
    if (killed_at_[i] >= 0) continue;
    if (paused_at_[i] >= 0 &&
        (pauses_[i].empty() || pauses_[i].back().first != paused_at_[i])) {
      Resume(i);
    }
    kill(workers_[i]->pid(), SIGTERM);
  }
  for (int i = 0; i < options_.workers; ++i) {
    if (killed_at_[i] >= 0) continue;
    absl::Status exited =
        WaitUntil([&] { return !workers_[i]->Running(); }, absl::Seconds(15),
                  absl::StrCat("worker ", i, " to exit after SIGTERM"),
                  absl::StrCat(dir_, "/worker-", i, ".log"));
    if (!exited.ok()) exit_problems.push_back(exited.ToString());
  }
  std::vector<WorkerHistory> histories = Histories();
  for (const WorkerHistory& w : histories) {
    if (killed_at_[w.id] >= 0) continue;
    if (w.events.empty() || w.events.back().kind != "exit") {
      exit_problems.push_back(absl::StrCat(
          "worker ", w.id, " did not exit cleanly (crashed or hung); log: ",
          FileTail(absl::StrCat(dir_, "/worker-", w.id, ".log"), 600)));
    }
  }
  const int64_t healed = healed_at_ == 0 ? MonoNowNs() : healed_at_;
  HistoryReport report;
  if (const int keys = options_.Cells(); keys > 0) {
    std::vector<std::pair<int64_t, int64_t>> cells;
    for (int slot = 0; slot < keys; ++slot) {
      cells.push_back({register_->counter(slot), register_->sets(slot)});
    }
    report =
        CheckKeyedHistory(histories, register_->Writes(), cells, healed,
                          absl::StartsWith(options_.primitive, "semaphore:")
                              ? KeyedObject::kSemaphore
                              : KeyedObject::kMultiLock,
                          options_.release_rule);
  } else {
    report = CheckHistory(histories, register_->Writes(), register_->counter(),
                          register_->sets(), healed, options_.release_rule);
  }
  for (std::string& p : exit_problems) {
    report.exit_problems.push_back(std::move(p));
  }
  return report;
}

}  // namespace dlock::test
