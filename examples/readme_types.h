// Copyright dlock authors. The reader's own types that README.md's first
// example (readme_example.cc) uses: a ledger written under a fencing token,
// and an account. Small stand-ins that print what they are asked to do.
#ifndef DLOCK_EXAMPLES_README_TYPES_H_
#define DLOCK_EXAMPLES_README_TYPES_H_

#include <cstdint>
#include <iostream>
#include <string>

#include "absl/status/status.h"

class Ledger {
 public:
  absl::Status Settle(uint64_t fencing_token) {
    std::cout << "settled under fencing token " << fencing_token << "\n";
    return absl::OkStatus();
  }
  void Abort() { std::cout << "settlement aborted: the lock was lost\n"; }
};

struct Account {
  std::string id;
  int64_t balance_cents = 0;
  void Credit(int64_t cents) {
    balance_cents += cents;
    std::cout << "account " << id << " credited " << cents << " cents\n";
  }
};

#endif  // DLOCK_EXAMPLES_README_TYPES_H_
