// The quick-start demo: worker processes contend for one Redis lock; each
// turn reads a shared counter file, checks that nobody else is inside and
// that its fencing token is newer than the last writer's, writes counter+1
// with its token, and releases. The parent prints acquisitions per worker,
// hand-off latency (release to the next holder) and the overlaps (0).
//
//   dlock_demo [workers] [rounds]          starts its own redis-server
//   dlock_demo --worker URI DIR ID ROUNDS   (what the parent runs)
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dlock/dlock.h"
#include "redis_server.h"

namespace {

struct Counter {
  int64_t value = 0;
  uint64_t token = 0;
};

Counter ReadCounter(const std::string& path) {
  Counter c;
  std::ifstream in(path);
  in >> c.value >> c.token;
  return c;
}

// One worker process. Its log has a line per turn:
// "<acquired ns> <released ns> <overlap 0|1> <stale token 0|1>".
int RunWorker(const std::string& uri, const std::string& dir, int id,
              int rounds) {
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
      dlock::Connect(uri);
  if (!client.ok()) {
    std::cerr << "worker " << id << ": " << client.status() << "\n";
    return 1;
  }
  absl::StatusOr<std::unique_ptr<dlock::DistributedLock>> lock =
      (*client)->GetLock("demo/counter");
  if (!lock.ok()) return 1;
  std::ofstream log(absl::StrCat(dir, "/worker-", id, ".log"));
  const std::string counter_path = dir + "/counter";
  const std::string inside_path = dir + "/inside";
  for (int i = 0; i < rounds; ++i) {
    absl::StatusOr<dlock::Hold> held =
        (*lock)->Acquire({.wait = absl::Seconds(60)});
    if (!held.ok()) {
      std::cerr << "worker " << id << ": " << held.status() << "\n";
      return 1;
    }
    const int64_t acquired_ns = absl::GetCurrentTimeNanos();
    // O_EXCL fails if another process is inside: an overlap.
    int fd = open(inside_path.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    const bool overlap = fd < 0;
    Counter c = ReadCounter(counter_path);
    const bool stale = c.token >= held->fencing_token();
    {
      std::ofstream out(counter_path + ".tmp");
      out << c.value + 1 << " " << held->fencing_token() << "\n";
    }
    std::rename((counter_path + ".tmp").c_str(), counter_path.c_str());
    if (fd >= 0) {
      close(fd);
      unlink(inside_path.c_str());
    }
    const int64_t released_ns = absl::GetCurrentTimeNanos();
    if (absl::Status s = held->Release(); !s.ok()) {
      std::cerr << "worker " << id << ": " << s << "\n";
      return 1;
    }
    log << acquired_ns << " " << released_ns << " " << overlap << " " << stale
        << "\n";
    // Work outside the lock, as a real worker has; without it the releaser
    // usually takes the lock straight back (Redis locks are not fair).
    absl::SleepFor(absl::Microseconds(500));
  }
  return 0;
}

struct Turn {
  int64_t acquired_ns, released_ns;
  int worker;
};

int RunDemo(const char* self, int workers, int rounds) {
  absl::StatusOr<std::unique_ptr<dlock::test::RedisServer>> server =
      dlock::test::RedisServer::Start();
  if (!server.ok()) {
    std::cerr << server.status() << "\n";
    return 1;
  }
  absl::StatusOr<std::string> dir = dlock::test::MakeTempDir("dlock-demo");
  if (!dir.ok()) return 1;
  const std::string uri = (*server)->Uri("demo");
  std::cout << "redis-server on port " << (*server)->port() << "; " << workers
            << " worker processes x " << rounds
            << " turns on lock 'demo/counter'\n";
  std::vector<pid_t> pids;
  for (int w = 0; w < workers; ++w) {
    pid_t pid = fork();
    if (pid == 0) {
      execl(self, self, "--worker", uri.c_str(), dir->c_str(),
            std::to_string(w).c_str(), std::to_string(rounds).c_str(), nullptr);
      _exit(127);
    }
    pids.push_back(pid);
  }
  bool failed = false;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  std::vector<Turn> turns;
  int overlaps = 0, stale = 0;
  for (int w = 0; w < workers; ++w) {
    std::ifstream in(absl::StrCat(*dir, "/worker-", w, ".log"));
    Turn t{0, 0, w};
    int overlap = 0, was_stale = 0, count = 0;
    while (in >> t.acquired_ns >> t.released_ns >> overlap >> was_stale) {
      turns.push_back(t);
      overlaps += overlap;
      stale += was_stale;
      ++count;
    }
    std::cout << absl::StrFormat("  worker %d: %d acquisitions\n", w, count);
  }
  std::sort(turns.begin(), turns.end(), [](const Turn& a, const Turn& b) {
    return a.acquired_ns < b.acquired_ns;
  });
  // Hand-offs between different workers: release to the next acquisition.
  std::vector<int64_t> handoffs;
  for (size_t i = 1; i < turns.size(); ++i) {
    if (turns[i].worker != turns[i - 1].worker) {
      handoffs.push_back(turns[i].acquired_ns - turns[i - 1].released_ns);
    }
  }
  std::sort(handoffs.begin(), handoffs.end());
  const Counter final_counter = ReadCounter(*dir + "/counter");
  std::cout << absl::StrFormat("counter: %d (expected %d)\n",
                               final_counter.value,
                               static_cast<int64_t>(workers) * rounds);
  if (!handoffs.empty()) {
    std::cout << absl::StrFormat(
        "hand-off latency: median %s, p99 %s (%d hand-offs)\n",
        absl::FormatDuration(absl::Nanoseconds(handoffs[handoffs.size() / 2])),
        absl::FormatDuration(
            absl::Nanoseconds(handoffs[handoffs.size() * 99 / 100])),
        handoffs.size());
  }
  std::cout << "overlaps: " << overlaps << "\n"
            << "stale fencing tokens: " << stale << "\n";
  dlock::test::RemoveTree(*dir);
  const bool ok = !failed && overlaps == 0 && stale == 0 &&
                  final_counter.value == static_cast<int64_t>(workers) * rounds;
  std::cout << (ok ? "demo OK" : "demo FAILED") << "\n";
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "--worker") {
    int id = 0, rounds = 0;
    if (!absl::SimpleAtoi(argv[4], &id) ||
        !absl::SimpleAtoi(argv[5], &rounds)) {
      return 2;
    }
    return RunWorker(argv[2], argv[3], id, rounds);
  }
  int workers = 4, rounds = 100;
  if ((argc > 1 && !absl::SimpleAtoi(argv[1], &workers)) ||
      (argc > 2 && !absl::SimpleAtoi(argv[2], &rounds)) || workers < 1 ||
      rounds < 1) {
    std::cerr << "usage: " << argv[0] << " [workers] [rounds]\n";
    return 2;
  }
  return RunDemo(argv[0], workers, rounds);
}
