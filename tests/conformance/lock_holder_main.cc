// Copyright dlock authors. A lock holder in a process of its own, for the
// conformance case of a holder that dies without releasing (C2).
//
//   dlock_lock_holder <uri> <lock name> <lease>
//
// Takes the lock, prints "HELD <fencing token>" and sleeps until killed. The
// hold is renewed by the watchdog with <lease> as its lease, so the lock stays
// held as long as the process lives: only its death can free it.
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/dlock.h"
#include "dlock/uri.h"

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "ERROR %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <uri> <lock name> <lease, e.g. 1s>\n",
                 argv[0]);
    return 2;
  }
  absl::StatusOr<absl::Duration> lease = dlock::ParsePositiveDuration(argv[3]);
  if (!lease.ok()) return Fail(lease.status());

  dlock::ClientOptions options;
  options.watchdog_lease = *lease;
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
      dlock::Connect(argv[1], options);
  if (!client.ok()) return Fail(client.status());
  absl::StatusOr<std::unique_ptr<dlock::DistributedLock>> lock =
      (*client)->GetLock(argv[2]);
  if (!lock.ok()) return Fail(lock.status());

  dlock::AcquireOptions acquire;
  acquire.wait = absl::Seconds(30);
  // The Hold lives as long as main() does: it is never destroyed, so never
  // released.
  absl::StatusOr<dlock::Hold> hold = (*lock)->Acquire(acquire);
  if (!hold.ok()) return Fail(hold.status());

  std::printf("HELD %llu\n",
              static_cast<unsigned long long>(hold->fencing_token()));
  std::fflush(stdout);
  // The test ends this process with SIGKILL; nothing here releases the lock.
  while (true) pause();
}
