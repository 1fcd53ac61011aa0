// Copyright dlock authors. A lock holder in a process of its own, for the
// conformance cases of a holder that dies without releasing (C2) and of a
// process that releases keeping the lock and exits at once.
//
//   dlock_lock_holder [--permits N] <uri> <lock name> <lease> [<keep for>]
//
// Takes the lock (with --permits, every permit of semaphore <name> of N:
// C22), prints "HELD <fencing token>" and sleeps until killed. The
// hold is renewed by the watchdog with <lease> as its lease, so the lock stays
// held as long as the process lives: only its death can free it. With
// <keep for>, it prints "KEEPING <unix micros>", releases with
// Hold::ReleaseAndKeepFor(), prints "KEPT", closes its client and exits.
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dlock/dlock.h"
#include "dlock/uri.h"

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "ERROR %s\n", status.ToString().c_str());
  return 1;
}

// Every permit of semaphore `name` of `permits` (the Hold of the grant).
absl::StatusOr<dlock::Hold> TakePermits(dlock::LockClient& client,
                                        const char* name, const char* permits,
                                        const dlock::AcquireOptions& acquire) {
  int64_t n = 0;
  if (!absl::SimpleAtoi(permits, &n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--permits takes a number, not '", permits, "'"));
  }
  absl::StatusOr<std::unique_ptr<dlock::Semaphore>> semaphore =
      client.GetSemaphore(name, n);
  if (!semaphore.ok()) return semaphore.status();
  absl::StatusOr<dlock::Permit> permit = (*semaphore)->Acquire(n, acquire);
  if (!permit.ok()) return permit.status();
  return std::move(permit->hold());
}

}  // namespace

int main(int argc, char** argv) {
  const char* permits = nullptr;
  if (argc >= 3 && absl::string_view(argv[1]) == "--permits") {
    permits = argv[2];
    argv[2] = argv[0];
    argv += 2;
    argc -= 2;
  }
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr,
                 "usage: %s [--permits N] <uri> <lock name> <lease, e.g. 1s> "
                 "[<keep for>]\n",
                 argv[0]);
    return 2;
  }
  absl::StatusOr<absl::Duration> lease = dlock::ParsePositiveDuration(argv[3]);
  if (!lease.ok()) return Fail(lease.status());
  absl::StatusOr<absl::Duration> keep_for = absl::ZeroDuration();
  if (argc == 5) keep_for = dlock::ParsePositiveDuration(argv[4]);
  if (!keep_for.ok()) return Fail(keep_for.status());

  dlock::ClientOptions options;
  options.watchdog_lease = *lease;
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
      dlock::Connect(argv[1], options);
  if (!client.ok()) return Fail(client.status());
  dlock::AcquireOptions acquire;
  acquire.wait = absl::Seconds(30);
  // The Hold lives as long as main() does: it is never destroyed, so never
  // released.
  absl::StatusOr<dlock::Hold> hold =
      permits != nullptr ? TakePermits(**client, argv[2], permits, acquire)
                         : (*client)->Acquire(argv[2], acquire);
  if (!hold.ok()) return Fail(hold.status());

  std::printf("HELD %llu\n",
              static_cast<unsigned long long>(hold->fencing_token()));
  std::fflush(stdout);
  if (*keep_for > absl::ZeroDuration()) {
    std::printf("KEEPING %lld\n",
                static_cast<long long>(absl::ToUnixMicros(absl::Now())));
    if (absl::Status kept = hold->ReleaseAndKeepFor(*keep_for); !kept.ok()) {
      return Fail(kept);
    }
    std::printf("KEPT\n");
    std::fflush(stdout);
    // Closing releases whatever the client holds: the kept lock is nobody's.
    if (absl::Status closed = (*client)->Close(); !closed.ok()) {
      return Fail(closed);
    }
    return 0;
  }
  // The test ends this process with SIGKILL; nothing here releases the lock.
  while (true) pause();
}
