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
//       [--primitive lock|semaphore:N|read|write|election|multi:M:K]
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
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
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

// What one part of a grant guards: the register's cell `key`, written with
// `token`. A lock, a permit or a leadership has one part; a multi-lock one
// per name.
struct Part {
  uint64_t token = 0;
  int key = 0;
  std::string detail;  // its grant event's
};

// One grant of whatever the worker contends for.
struct Granted {
  dlock::Hold hold;        // every primitive's but a multi-lock's
  dlock::MultiHold multi;  // a multi-lock's
  std::vector<Part> parts;
  bool writes = true;  // a reader only looks

  dlock::LockState state() const {
    return multi.active() ? multi.state() : hold.state();
  }
  absl::Status Release() {
    return multi.active() ? multi.Release() : hold.Release();
  }
  // Each token once: a multi-lock's names may share one.
  std::vector<uint64_t> Tokens() const {
    std::vector<uint64_t> tokens;
    for (const Part& p : parts) {
      if (std::find(tokens.begin(), tokens.end(), p.token) == tokens.end()) {
        tokens.push_back(p.token);
      }
    }
    return tokens;
  }
};

// The object a worker contends for, by --primitive.
class Contended {
 public:
  static absl::StatusOr<Contended> Open(dlock::LockClient& client,
                                        const Flags& f) {
    Contended c;
    c.client_ = &client;
    c.kind_ = f.primitive;
    c.name_ = f.lock;
    std::vector<absl::string_view> spec = absl::StrSplit(f.primitive, ':');
    int64_t n = 0;
    if (c.kind_ == "lock") {
      absl::StatusOr<std::unique_ptr<dlock::DistributedLock>> lock =
          client.GetLock(f.lock);
      if (!lock.ok()) return lock.status();
      c.lock_ = *std::move(lock);
    } else if (spec.size() == 2 && spec[0] == "semaphore" &&
               absl::SimpleAtoi(spec[1], &n)) {
      absl::StatusOr<std::unique_ptr<dlock::Semaphore>> s =
          client.GetSemaphore(f.lock, n);
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
    } else if (spec.size() == 3 && spec[0] == "multi" &&
               absl::SimpleAtoi(spec[1], &c.names_) &&
               absl::SimpleAtoi(spec[2], &c.take_) && c.take_ > 0 &&
               c.take_ <= c.names_) {
      c.kind_ = "multi";
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown --primitive ", f.primitive));
    }
    return c;
  }

  absl::StatusOr<Granted> Acquire(const dlock::AcquireOptions& options, int id,
                                  std::mt19937& random) {
    if (kind_ == "multi") return AcquireMulti(options, random);
    Granted g;
    Part part;
    if (semaphore_ != nullptr) {
      absl::StatusOr<dlock::Permit> permit = semaphore_->Acquire(options);
      if (!permit.ok()) return permit.status();
      part.key = static_cast<int>(permit->slots().at(0));
      part.detail = absl::StrCat(" slot ", part.key);
      g.hold = std::move(permit->hold());
    } else if (rw_ != nullptr) {
      const bool read = kind_ == "read";
      absl::StatusOr<dlock::Hold> hold =
          read ? rw_->AcquireRead(options) : rw_->AcquireWrite(options);
      if (!hold.ok()) return hold.status();
      g.hold = *std::move(hold);
      g.writes = !read;
      part.detail = read ? " read" : "";
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
    part.token = g.hold.fencing_token();
    part.detail = absl::StrCat(g.hold.hold_count(), part.detail);
    g.parts.push_back(std::move(part));
    return g;
  }

 private:
  // `take_` of the names "<lock>-0" .. "<lock>-<names_ - 1>", in a random
  // order: the core must keep clients asking in different orders from
  // deadlocking (C25).
  absl::StatusOr<Granted> AcquireMulti(const dlock::AcquireOptions& options,
                                       std::mt19937& random) {
    std::vector<int> picked(static_cast<size_t>(names_));
    for (int i = 0; i < names_; ++i) picked[i] = i;
    std::shuffle(picked.begin(), picked.end(), random);
    picked.resize(static_cast<size_t>(take_));
    std::vector<std::string> names;
    for (int i : picked) names.push_back(absl::StrCat(name_, "-", i));
    absl::StatusOr<dlock::MultiHold> multi =
        client_->AcquireAll(names, options);
    if (!multi.ok()) return multi.status();
    Granted g;
    for (size_t i = 0; i < names.size(); ++i) {
      const dlock::Hold& hold = multi->holds()[i];
      g.parts.push_back(
          Part{.token = hold.fencing_token(),
               .key = picked[i],
               .detail = absl::StrCat(hold.hold_count(), " slot ", picked[i])});
    }
    g.multi = *std::move(multi);
    return g;
  }

  dlock::LockClient* client_ = nullptr;
  std::string kind_;  // --primitive
  std::string name_;
  int names_ = 0, take_ = 0;  // a multi-lock's
  std::unique_ptr<dlock::DistributedLock> lock_;
  std::unique_ptr<dlock::Semaphore> semaphore_;
  std::unique_ptr<dlock::ReadWriteLock> rw_;
  std::unique_ptr<dlock::Election> election_;
};

// A fenced write, then an unfenced read-modify-write: a second believer in
// between loses an update.
void WriteOnce(const Part& part, int id, dlock::test::RegisterClient& resource,
               EventLog& log) {
  absl::StatusOr<bool> written = resource.Write(part.token, id, part.key);
  if (written.ok()) {
    log.Add(MonoNs(), *written ? "write_ok" : "write_stale", part.token);
  }
  absl::StatusOr<int64_t> value = resource.Get(part.key);
  if (value.ok()) {
    absl::SleepFor(absl::Milliseconds(2));
    if (resource.Set(*value + 1, part.key).ok()) {
      log.Add(MonoNs(), "increment", part.token);
    }
  }
}

// Works while the grant is believed held: each step checks state() first.
void Work(const Granted& granted, const Flags& f,
          dlock::test::RegisterClient& resource, EventLog& log) {
  const std::vector<uint64_t> tokens = granted.Tokens();
  for (int i = 0; i < f.steps && !stopping; ++i) {
    // Read before asking: if state() says held, the hold was believed at
    // this instant or later, never earlier.
    const int64_t asked = MonoNs();
    const bool held = granted.state() == dlock::LockState::kHeld;
    for (uint64_t token : tokens)
      log.Add(asked, held ? "held" : "not_held", token);
    if (!held) return;
    if (granted.writes) {
      for (const Part& part : granted.parts) {
        WriteOnce(part, f.id, resource, log);
      }
    }
    absl::SleepFor(f.step);
  }
}

// The tokens a lost notice ends: a multi-lock is lost whole (C25), told
// once with the event of its first name lost.
class LostTokens {
 public:
  void Set(std::vector<uint64_t> tokens) {
    absl::MutexLock lock(&mu_);
    tokens_ = std::move(tokens);
  }
  std::vector<uint64_t> Of(const dlock::LockLostEvent& e) const {
    absl::MutexLock lock(&mu_);
    if (std::find(tokens_.begin(), tokens_.end(), e.fencing_token) ==
        tokens_.end()) {
      return {e.fencing_token};
    }
    return tokens_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<uint64_t> tokens_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (!ParseFlags(argc, argv, f)) {
    std::fprintf(
        stderr,
        "usage: %s --uri U --lock NAME --id N --events FILE "
        "--register PORT [--lease D] [--explicit-lease] [--wait D] "
        "[--steps N] [--step D] [--pause D] [--owner-token T] "
        "[--seconds D] "
        "[--primitive lock|semaphore:N|read|write|election|multi:M:K]\n",
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
    auto lost_tokens = std::make_shared<LostTokens>();
    acquire.on_lost = [&log, lost_tokens](const dlock::LockLostEvent& e) {
      const int64_t at = MonoNs();
      for (uint64_t token : lost_tokens->Of(e)) {
        log.Add(at, "lost", token, e.reason.ToString());
      }
    };
    absl::StatusOr<Granted> granted = contended->Acquire(acquire, f.id, random);
    if (!granted.ok()) {
      log.Add(MonoNs(), "acquire_error", 0, granted.status().ToString());
      absl::SleepFor(absl::Milliseconds(20 + random() % 30));
      continue;
    }
    lost_tokens->Set(granted->Tokens());
    const int64_t at = MonoNs();
    for (const Part& part : granted->parts) {
      log.Add(at, "grant", part.token, part.detail);
    }
    Work(*granted, f, resource, log);
    const int64_t releasing = MonoNs();
    absl::Status released = granted->Release();
    for (uint64_t token : granted->Tokens()) {
      log.Add(releasing, released.ok() ? "released" : "release_error", token,
              released.ToString());
    }
    // A random pause between holds, so that others get their turn.
    absl::SleepFor(absl::Milliseconds(
        random() % std::max<int64_t>(1, absl::ToInt64Milliseconds(f.pause))));
  }
  absl::Status closed = (*client)->Close();
  log.Add(MonoNs(), "exit", 0, closed.ToString());
  return 0;
}
