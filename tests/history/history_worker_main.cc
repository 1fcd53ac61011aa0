// Copyright dlock authors. One worker of the history checker: a process that
// contends for one lock, and while it believes it holds it, writes to a
// fenced register and increments an unfenced counter, both kept by the
// checker (history_register.h). Every step is logged to its own event file
// with a CLOCK_MONOTONIC timestamp (shared by every process of the machine),
// one write(2) per line so that a SIGKILL loses nothing already done.
//
//   dlock_history_worker --uri U --lock NAME --id N --events FILE
//       --register PORT [--lease 1s] [--explicit-lease] [--wait 2s]
//       [--steps 4] [--step 40ms] [--pause 30ms] [--owner-token T]
//       [--seconds 30]
//
// Event lines: "<ns> <kind> <token> <detail>", kinds: attempt, grant,
// acquire_error, held, not_held, write_ok, write_stale, increment, lost,
// released, release_error, exit. SIGTERM ends the run after the current
// step: the worker releases, closes its client and exits 0.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/dlock.h"
#include "dlock/uri.h"
#include "history_register.h"

namespace {

std::atomic<bool> stopping{false};

void OnTerm(int) { stopping = true; }

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Appends whole lines to the event file.
class EventLog {
 public:
  explicit EventLog(const std::string& path)
      : fd_(open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                 0644)) {}
  bool ok() const { return fd_ >= 0; }
  void Add(int64_t at, absl::string_view kind, uint64_t token,
           absl::string_view detail = "") {
    std::string line = absl::StrCat(at, " ", kind, " ", token, " ", detail);
    for (char& c : line) {
      if (c == '\n') c = ' ';
    }
    line.push_back('\n');
    (void)!write(fd_, line.data(), line.size());
  }

 private:
  int fd_;
};

struct Flags {
  std::string uri, lock, events, owner_token;
  int id = 0, register_port = 0, steps = 4;
  absl::Duration lease = absl::Seconds(1), wait = absl::Seconds(2),
                 step = absl::Milliseconds(40), run = absl::Seconds(30),
                 pause = absl::Milliseconds(30);
  bool explicit_lease = false;
};

bool ParseFlags(int argc, char** argv, Flags& f) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--explicit-lease") {
      f.explicit_lease = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    const std::string value = argv[++i];
    auto duration = [&](absl::Duration& d) {
      absl::StatusOr<absl::Duration> parsed =
          dlock::ParsePositiveDuration(value);
      if (parsed.ok()) d = *parsed;
      return parsed.ok();
    };
    bool ok = true;
    if (arg == "--uri") {
      f.uri = value;
    } else if (arg == "--lock") {
      f.lock = value;
    } else if (arg == "--events") {
      f.events = value;
    } else if (arg == "--owner-token") {
      f.owner_token = value;
    } else if (arg == "--id") {
      ok = absl::SimpleAtoi(value, &f.id);
    } else if (arg == "--register") {
      ok = absl::SimpleAtoi(value, &f.register_port);
    } else if (arg == "--steps") {
      ok = absl::SimpleAtoi(value, &f.steps);
    } else if (arg == "--lease") {
      ok = duration(f.lease);
    } else if (arg == "--wait") {
      ok = duration(f.wait);
    } else if (arg == "--step") {
      ok = duration(f.step);
    } else if (arg == "--seconds") {
      ok = duration(f.run);
    } else if (arg == "--pause") {
      ok = duration(f.pause);
    } else {
      ok = false;
    }
    if (!ok) return false;
  }
  return !f.uri.empty() && !f.lock.empty() && !f.events.empty() &&
         f.register_port > 0;
}

// Works while the lock is believed held: each step checks state() first.
void Work(const dlock::Hold& hold, const Flags& f,
          dlock::test::RegisterClient& resource, EventLog& log) {
  const uint64_t token = hold.fencing_token();
  for (int i = 0; i < f.steps && !stopping; ++i) {
    // Read before asking: if state() says held, the hold was believed at
    // this instant or later, never earlier.
    const int64_t asked = MonoNs();
    if (hold.state() != dlock::LockState::kHeld) {
      log.Add(asked, "not_held", token);
      return;
    }
    log.Add(asked, "held", token);
    absl::StatusOr<bool> written = resource.Write(token, f.id);
    if (written.ok()) {
      log.Add(MonoNs(), *written ? "write_ok" : "write_stale", token);
    }
    // An unfenced read-modify-write: a second believer in between loses
    // an update.
    absl::StatusOr<int64_t> value = resource.Get();
    if (value.ok()) {
      absl::SleepFor(absl::Milliseconds(2));
      if (resource.Set(*value + 1).ok()) log.Add(MonoNs(), "increment", token);
    }
    absl::SleepFor(f.step);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (!ParseFlags(argc, argv, f)) {
    std::fprintf(stderr,
                 "usage: %s --uri U --lock NAME --id N --events FILE "
                 "--register PORT [--lease D] [--explicit-lease] [--wait D] "
                 "[--steps N] [--step D] [--pause D] [--owner-token T] "
                 "[--seconds D]\n",
                 argv[0]);
    return 2;
  }
  signal(SIGTERM, OnTerm);
  signal(SIGPIPE, SIG_IGN);
  EventLog log(f.events);
  if (!log.ok()) return 3;
  dlock::test::RegisterClient resource(f.register_port);

  dlock::ClientOptions options;
  options.watchdog_lease = f.lease;
  options.close_timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
      dlock::Connect(f.uri, options);
  if (!client.ok()) {
    log.Add(MonoNs(), "exit", 0, client.status().ToString());
    return 4;
  }
  std::unique_ptr<dlock::DistributedLock> lock = *(*client)->GetLock(f.lock);
  std::mt19937 random(static_cast<uint32_t>(f.id * 7919 + getpid()));
  const int64_t end = MonoNs() + absl::ToInt64Nanoseconds(f.run);

  while (!stopping && MonoNs() < end) {
    log.Add(MonoNs(), "attempt", 0);
    dlock::AcquireOptions acquire;
    acquire.wait = f.wait;
    acquire.owner_token = f.owner_token;
    if (f.explicit_lease) acquire.lease = f.lease;
    acquire.on_lost = [&log](const dlock::LockLostEvent& e) {
      log.Add(MonoNs(), "lost", e.fencing_token, e.reason.ToString());
    };
    absl::StatusOr<dlock::Hold> hold = lock->Acquire(acquire);
    if (!hold.ok()) {
      log.Add(MonoNs(), "acquire_error", 0, hold.status().ToString());
      absl::SleepFor(absl::Milliseconds(20 + random() % 30));
      continue;
    }
    const uint64_t token = hold->fencing_token();
    log.Add(MonoNs(), "grant", token, absl::StrCat(hold->hold_count()));
    Work(*hold, f, resource, log);
    const int64_t releasing = MonoNs();
    absl::Status released = hold->Release();
    log.Add(releasing, released.ok() ? "released" : "release_error", token,
            released.ToString());
    // A random pause between holds, so that others get their turn.
    absl::SleepFor(absl::Milliseconds(
        random() % std::max<int64_t>(1, absl::ToInt64Milliseconds(f.pause))));
  }
  absl::Status closed = (*client)->Close();
  log.Add(MonoNs(), "exit", 0, closed.ToString());
  return 0;
}
