// Copyright dlock authors. What `dlock top` shows, as pure functions of a
// listing: the rows, their order, and the screen cut to the terminal's size
// (tested without a terminal in adapters/tests/lock_table_test.cc).
#ifndef DLOCK_ADAPTERS_CLI_LOCK_TABLE_H_
#define DLOCK_ADAPTERS_CLI_LOCK_TABLE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli_common.h"
#include "dlock/client.h"
#include "dlock/lock.h"
#include "dlock/traits.h"

namespace dlock::cli {

// OK where the backend can list; otherwise FailedPrecondition saying that
// `command` needs a listing and what to use instead.
absl::Status CheckCanList(const BackendTraits& traits,
                          absl::string_view endpoint,
                          absl::string_view command);

// Connects as the flags say and checks that the backend can list; on
// failure, prints the error (one line) and returns null with `exit_code`
// set.
std::unique_ptr<LockClient> ConnectForListingOrFail(const BackendFlags& flags,
                                                    absl::string_view command,
                                                    int& exit_code,
                                                    ClientOptions options = {});

// Who holds a locked lock, for people: a lock kept after its release
// (Hold::ReleaseAndKeepFor) has no owner.
std::string HolderText(const LockInfo& info);

// Whether a waiter takes `info` over at once, whatever its lease: its
// holder is not live (its liveness record lapsed, its session ended), or the
// lease ran out on the backend.
bool Takeable(const LockInfo& info);
// "free to take over: its holder is not live", or "...: its lease ran out".
std::string TakeableWhy(const LockInfo& info);

// Whether the holder is live, for a LIVE column: "yes", "no", "?" (the
// backend cannot tell) or "-" (kept after release: nobody holds it).
std::string LiveText(const LockInfo& info);

// `rows` (the first is the header) as lines of columns, each as wide as its
// widest cell (counted in characters, not bytes), two spaces apart: left
// aligned, but for the columns `right_aligned` marks; the last column is not
// padded when it is left aligned.
std::string AlignColumns(const std::vector<std::vector<std::string>>& rows,
                         const std::vector<bool>& right_aligned = {});

// How long the current holder has held `info` at `now`; unset when the
// backend did not say when the hold began.
std::optional<absl::Duration> HeldFor(const LockInfo& info, absl::Time now);

// "1.5s", "2m03s", "1h02m", "3d04h": short and readable at a glance, and
// of one precision whatever the backend reported (leases in status, list
// and top).
std::string ShortDuration(absl::Duration d);

enum class SortKey { kName, kHeldFor, kLeaseLeft, kToken };

struct SortOrder {
  SortKey key = SortKey::kHeldFor;
  bool reversed = false;
};

// The order after key `c` is pressed: n, h, l, t pick a key (pressing the
// current key again keeps it), r reverses. Unset for any other key.
std::optional<SortOrder> ApplySortKey(SortOrder order, char c);

// "held-for", and so on; with " (reversed)" when reversed.
std::string SortOrderName(SortOrder order);

// Sorts in place: names ascending, held-for and token descending (longest
// and newest first), lease left ascending (closest to expiry first); ties by
// name. `reversed` flips the whole order.
void SortLocks(std::vector<LockInfo>& locks, SortOrder order, absl::Time now);

// One screen of `dlock top`.
struct TopScreen {
  std::string endpoint;  // redacted: LockClient::endpoint()
  std::string lock_namespace;
  std::string prefix;
  absl::Duration interval;
  SortOrder order;
  absl::Time now;
  std::vector<LockInfo> locks;  // the last successful listing, sorted
  std::string status;           // "" or the last error, kept while it lasts
};

// The screen as lines, none longer than `width` columns and at most
// `height` lines: the endpoint, the count and order, a status line, the
// column header and as many rows
// as fit (the last line says how many more there are). Plain text: the
// terminal code adds the escapes.
std::vector<std::string> RenderTopScreen(const TopScreen& screen, int width,
                                         int height);

// What `dlock top` prints without a terminal (a pipe, cron, --once): the
// same header and columns as the screen, but every name and holder whole,
// the columns as wide as their widest cell, and no key hints.
std::string RenderTopSnapshot(const TopScreen& screen);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_LOCK_TABLE_H_
