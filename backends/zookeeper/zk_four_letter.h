// Copyright dlock authors. ZooKeeper's four-letter-word commands (mntr, ruok)
// on the client port: plain text over a TCP connection of their own.
#ifndef DLOCK_BACKENDS_ZOOKEEPER_ZK_FOUR_LETTER_H_
#define DLOCK_BACKENDS_ZOOKEEPER_ZK_FOUR_LETTER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dlock::zk {

// Sends `word` to the server at `host_port` ("host:port" or "[v6]:port") and
// returns what it writes before closing. Unavailable when it cannot be
// reached or does not finish within `timeout`; Unimplemented when the server
// refuses the word (4lw.commands.whitelist).
absl::StatusOr<std::string> FourLetterWord(absl::string_view host_port,
                                           absl::string_view word,
                                           absl::Duration timeout);

// The value of `key` in mntr's output ("key<TAB>value" lines).
absl::StatusOr<int64_t> MntrValue(absl::string_view mntr,
                                  absl::string_view key);

}  // namespace dlock::zk

#endif  // DLOCK_BACKENDS_ZOOKEEPER_ZK_FOUR_LETTER_H_
