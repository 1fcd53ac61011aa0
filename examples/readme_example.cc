// README.md's first example, as a program: built by examples/CMakeLists.txt
// and run by adapters/tests/docs_examples_test.cc, whose DocsSnippetsTest
// also checks that README.md shows exactly this code. readme_types.h stands
// in for the reader's Ledger and Account.
#include "readme_types.h"
// README.md's code from here on.
#include <iostream>
#include <mutex>

#include "dlock/dlock.h"

// Runs the nightly settlement at most once across the cluster.
absl::Status SettleAccounts(dlock::LockClient& locks, Ledger& ledger) {
  // No lease given: the watchdog renews the hold until it is released (by
  // Release() or the Hold's destructor), and on_lost fires if the hold is
  // lost anyway (backend gone, forced unlock).
  absl::StatusOr<dlock::Hold> held = locks.Acquire(
      "settlement/nightly",
      {.wait = absl::Seconds(10),
       .on_lost = [&](const dlock::LockLostEvent&) { ledger.Abort(); }});
  // dlock::IsWaitExpired(held.status()), IsHeldByAnother, ... say what
  // happened; held.status().message() says it to a person.
  if (!held.ok()) return held.status();

  // The fencing token lets the ledger refuse a writer whose hold is stale.
  absl::Status settled = ledger.Settle(held->fencing_token());
  absl::Status released = held->Release();
  return settled.ok() ? released : settled;
}

// The same lock as a std mutex: one per account, across every process.
void Credit(dlock::LockClient& locks, Account& account, int64_t cents) {
  dlock::DistributedMutex mutex(locks, "account/" + account.id);
  std::scoped_lock hold(mutex);  // throws std::system_error if it cannot
  account.Credit(cents);
}

int main() {
  // The backend comes from configuration: DLOCK_BACKEND=redis://10.0.0.5:6379
  // (or a profile of a TOML file: DLOCK_PROFILE and DLOCK_CONFIG).
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> locks =
      dlock::ConnectFromEnv();
  if (!locks.ok()) {
    std::cerr << "dlock: " << locks.status().message() << "\n";
    return 1;
  }
  Ledger ledger;
  absl::Status settled = SettleAccounts(**locks, ledger);
  if (!settled.ok()) std::cerr << "settlement: " << settled.message() << "\n";
  Account account{.id = "17"};
  Credit(**locks, account, 500);
  return settled.ok() ? 0 : 1;
}
