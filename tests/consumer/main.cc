// Locks through an installed dlock; the memory backend needs no server.
#include <iostream>

#include "dlock/dlock.h"

int main() {
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
      dlock::Connect("memory://consumer");
  if (!client.ok()) {
    std::cerr << client.status() << "\n";
    return 1;
  }
  auto lock = (*client)->GetLock("installed");
  if (!lock.ok()) return 1;
  absl::StatusOr<dlock::Hold> held = (*lock)->TryAcquire();
  if (!held.ok()) return 1;
  const uint64_t fencing_token = held->fencing_token();
  if (!held->Release().ok()) return 1;
  std::cout << "consumer locked with fencing token " << fencing_token << "\n";
  return 0;
}
