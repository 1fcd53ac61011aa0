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
//       [--seconds 30] [--primitive lock|semaphore:N|read|write|election]
//
// Event lines: "<ns> <kind> <token> <detail>", kinds: attempt, grant,
// acquire_error, held, not_held, write_ok, write_stale, increment, lost,
// released, release_error, exit; a grant's detail is "<holds>", "<holds>
// read" for a reader, "<holds> slot <s>" for a permit (history_checker.h).
// SIGTERM ends the run after the current step: the worker releases, closes its
// client and exits 0.
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
#include "absl/strings/strip.h"
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
  std::string uri, lock, events, owner_token, primitive = "lock";
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
    } else if (arg == "--primitive") {
      f.primitive = value;
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

// One grant of whatever the worker contends for, as a Hold.
struct Granted {
  dlock::Hold hold;
  std::string detail;  // the grant's event detail
  int key = 0;         // the register's cell it guards
  bool writes = true;  // a reader only looks
};

// The object a worker contends for, by --primitive.
class Contended {
 public:
  static absl::StatusOr<Contended> Open(dlock::LockClient& client,
                                        const Flags& f) {
    Contended c;
    c.kind_ = f.primitive;
    absl::string_view permits_spec = f.primitive;
    int64_t permits = 0;
    if (c.kind_ == "lock") {
      absl::StatusOr<std::unique_ptr<dlock::DistributedLock>> lock =
          client.GetLock(f.lock);
      if (!lock.ok()) return lock.status();
      c.lock_ = *std::move(lock);
    } else if (absl::ConsumePrefix(&permits_spec, "semaphore:") &&
               absl::SimpleAtoi(permits_spec, &permits)) {
      absl::StatusOr<std::unique_ptr<dlock::Semaphore>> s =
          client.GetSemaphore(f.lock, permits);
      if (!s.ok()) return s.status();
      c.semaphore_ = *std::move(s);
    } else if (c.kind_ == "read" || c.kind_ == "write") {
      absl::StatusOr<std::unique_ptr<dlock::ReadWriteLock>> rw =
          client.GetReadWriteLock(f.lock);
      if (!rw.ok()) return rw.status();
      c.rw_ = *std::move(rw);
    } else if (c.kind_ == "election") {
      absl::StatusOr<std::unique_ptr<dlock::Election>> e =
          client.GetElection(f.lock);
      if (!e.ok()) return e.status();
      c.election_ = *std::move(e);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown --primitive ", f.primitive));
    }
    return c;
  }

  absl::StatusOr<Granted> Acquire(const dlock::AcquireOptions& options,
                                  int id) {
    Granted g;
    if (semaphore_ != nullptr) {
      absl::StatusOr<dlock::Permit> permit = semaphore_->Acquire(options);
      if (!permit.ok()) return permit.status();
      g.key = static_cast<int>(permit->slots().at(0));
      g.detail = absl::StrCat(" slot ", g.key);
      g.hold = std::move(permit->hold());
    } else if (rw_ != nullptr) {
      const bool read = kind_ == "read";
      absl::StatusOr<dlock::Hold> hold =
          read ? rw_->AcquireRead(options) : rw_->AcquireWrite(options);
      if (!hold.ok()) return hold.status();
      g.hold = *std::move(hold);
      g.writes = !read;
      g.detail = read ? " read" : "";
    } else if (election_ != nullptr) {
      absl::StatusOr<dlock::Leadership> leadership =
          election_->Campaign(absl::StrCat("worker-", id), options);
      if (!leadership.ok()) return leadership.status();
      g.hold = std::move(leadership->hold());
    } else {
      absl::StatusOr<dlock::Hold> hold = lock_->Acquire(options);
      if (!hold.ok()) return hold.status();
      g.hold = *std::move(hold);
    }
    g.detail = absl::StrCat(g.hold.hold_count(), g.detail);
    return g;
  }

 private:
  std::string kind_;  // --primitive
  std::unique_ptr<dlock::DistributedLock> lock_;
  std::unique_ptr<dlock::Semaphore> semaphore_;
  std::unique_ptr<dlock::ReadWriteLock> rw_;
  std::unique_ptr<dlock::Election> election_;
};

// A fenced write, then an unfenced read-modify-write: a second believer in
// between loses an update.
void WriteOnce(const Granted& granted, int id,
               dlock::test::RegisterClient& resource, EventLog& log) {
  const uint64_t token = granted.hold.fencing_token();
  absl::StatusOr<bool> written = resource.Write(token, id, granted.key);
  if (written.ok()) {
    log.Add(MonoNs(), *written ? "write_ok" : "write_stale", token);
  }
  absl::StatusOr<int64_t> value = resource.Get(granted.key);
  if (value.ok()) {
    absl::SleepFor(absl::Milliseconds(2));
    if (resource.Set(*value + 1, granted.key).ok()) {
      log.Add(MonoNs(), "increment", token);
    }
  }
}

// Works while the grant is believed held: each step checks state() first.
void Work(const Granted& granted, const Flags& f,
          dlock::test::RegisterClient& resource, EventLog& log) {
  const dlock::Hold& hold = granted.hold;
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
    if (granted.writes) WriteOnce(granted, f.id, resource, log);
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
                 "[--seconds D] "
                 "[--primitive lock|semaphore:N|read|write|election]\n",
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
  absl::StatusOr<Contended> contended = Contended::Open(**client, f);
  if (!contended.ok()) {
    log.Add(MonoNs(), "exit", 0, contended.status().ToString());
    return 4;
  }
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
    absl::StatusOr<Granted> granted = contended->Acquire(acquire, f.id);
    if (!granted.ok()) {
      log.Add(MonoNs(), "acquire_error", 0, granted.status().ToString());
      absl::SleepFor(absl::Milliseconds(20 + random() % 30));
      continue;
    }
    const uint64_t token = granted->hold.fencing_token();
    log.Add(MonoNs(), "grant", token, granted->detail);
    Work(*granted, f, resource, log);
    const int64_t releasing = MonoNs();
    absl::Status released = granted->hold.Release();
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
