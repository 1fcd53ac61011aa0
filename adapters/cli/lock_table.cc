#include "lock_table.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dlock::cli {
namespace {

// Column widths of the fixed columns; LOCK and HOLDER share the rest.
constexpr int kTokenWidth = 10;
constexpr int kHeldWidth = 9;
constexpr int kLeaseWidth = 10;
constexpr int kLiveWidth = 5;
constexpr int kWaitersWidth = 7;
constexpr int kFixedWidth = kTokenWidth + kHeldWidth + kLeaseWidth +
                            kLiveWidth + kWaitersWidth + 6;  // separators
constexpr int kMinNameWidth = 8;

// At most `width` bytes of `text`, never cutting a UTF-8 sequence.
std::string Cut(absl::string_view text, int width) {
  if (width <= 0) return "";
  if (static_cast<int>(text.size()) <= width) return std::string(text);
  size_t end = static_cast<size_t>(width);
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  return std::string(text.substr(0, end));
}

// `text` in a column of `width`: padded, or cut with a '~' marking the cut.
std::string Column(absl::string_view text, int width) {
  std::string shown(text);
  if (static_cast<int>(text.size()) > width) {
    shown = absl::StrCat(Cut(text, width - 1), "~");
  }
  return absl::StrFormat("%-*s", width, shown);
}

std::string RightColumn(absl::string_view text, int width) {
  if (static_cast<int>(text.size()) > width) return Column(text, width);
  return absl::StrFormat("%*s", width, text);
}

}  // namespace

absl::Status CheckCanList(const BackendTraits& traits,
                          absl::string_view endpoint,
                          absl::string_view command) {
  if (traits.can_list) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the backend at ", endpoint, " cannot list its locks, and ", command,
      " works from listings; use dlock status NAME for one lock"));
}

std::unique_ptr<LockClient> ConnectForListingOrFail(const BackendFlags& flags,
                                                    absl::string_view command,
                                                    int& exit_code,
                                                    ClientOptions options) {
  std::unique_ptr<LockClient> client =
      ConnectOrFail(flags, exit_code, std::move(options));
  if (client == nullptr) return nullptr;
  if (absl::Status s =
          CheckCanList(client->traits(), client->endpoint(), command);
      !s.ok()) {
    exit_code = Fail(s);
    return nullptr;
  }
  return client;
}

bool Takeable(const LockInfo& info) {
  return info.locked && (info.holder_live == std::optional<bool>(false) ||
                         info.remaining_lease <= absl::ZeroDuration());
}

std::string TakeableWhy(const LockInfo& info) {
  return info.holder_live == std::optional<bool>(false)
             ? "free to take over: its holder is not live"
             : "free to take over: its lease ran out";
}

std::string LiveText(const LockInfo& info) {
  if (info.kept_after_release) return "-";
  if (!info.holder_live.has_value()) return "?";
  return *info.holder_live ? "yes" : "no";
}

std::string AlignColumns(const std::vector<std::vector<std::string>>& rows,
                         const std::vector<bool>& right_aligned) {
  // UTF-8: a character is every byte but the continuation bytes.
  auto width = [](absl::string_view text) {
    return std::count_if(text.begin(), text.end(), [](char c) {
      return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    });
  };
  std::vector<int64_t> widths;
  for (const std::vector<std::string>& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max<int64_t>(widths[i], width(row[i]));
    }
  }
  std::string out;
  for (const std::vector<std::string>& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      const size_t pad = static_cast<size_t>(widths[i] - width(row[i]));
      const bool right = i < right_aligned.size() && right_aligned[i];
      if (right) out.append(pad, ' ');
      absl::StrAppend(&out, row[i]);
      if (i + 1 < row.size()) out.append(right ? 2 : pad + 2, ' ');
    }
    out.push_back('\n');
  }
  return out;
}

std::optional<absl::Duration> HeldFor(const LockInfo& info, absl::Time now) {
  if (!info.locked || info.since == absl::InfinitePast()) return std::nullopt;
  // The backend's clock may be a little ahead of ours.
  return std::max(now - info.since, absl::ZeroDuration());
}

std::string HolderText(const LockInfo& info) {
  return info.kept_after_release ? "(kept after release)" : info.owner;
}

std::string ShortDuration(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  if (d < absl::Seconds(60)) {
    return absl::StrFormat("%.1fs", absl::ToDoubleSeconds(d));
  }
  const int64_t s = absl::ToInt64Seconds(d);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, s % 86400 / 3600);
}

std::optional<SortOrder> ApplySortKey(SortOrder order, char c) {
  switch (c) {
    case 'n':
      return SortOrder{SortKey::kName, order.reversed};
    case 'h':
      return SortOrder{SortKey::kHeldFor, order.reversed};
    case 'l':
      return SortOrder{SortKey::kLeaseLeft, order.reversed};
    case 't':
      return SortOrder{SortKey::kToken, order.reversed};
    case 'r':
      return SortOrder{order.key, !order.reversed};
    default:
      return std::nullopt;
  }
}

std::string SortOrderName(SortOrder order) {
  const char* name = "name";
  switch (order.key) {
    case SortKey::kName:
      break;
    case SortKey::kHeldFor:
      name = "held-for";
      break;
    case SortKey::kLeaseLeft:
      name = "lease-left";
      break;
    case SortKey::kToken:
      name = "token";
      break;
  }
  return order.reversed ? absl::StrCat(name, " (reversed)") : name;
}

void SortLocks(std::vector<LockInfo>& locks, SortOrder order, absl::Time now) {
  // Ties fall back to the name, so that the order is stable across scans.
  auto before = [&](const LockInfo& a, const LockInfo& b) {
    switch (order.key) {
      case SortKey::kName:
        break;
      case SortKey::kHeldFor: {
        // Unknown hold times last.
        const absl::Duration ha =
            HeldFor(a, now).value_or(-absl::InfiniteDuration());
        const absl::Duration hb =
            HeldFor(b, now).value_or(-absl::InfiniteDuration());
        if (ha != hb) return ha > hb;
        break;
      }
      case SortKey::kLeaseLeft:
        if (a.remaining_lease != b.remaining_lease) {
          return a.remaining_lease < b.remaining_lease;
        }
        break;
      case SortKey::kToken:
        if (a.fencing_token != b.fencing_token) {
          return a.fencing_token > b.fencing_token;
        }
        break;
    }
    return a.name < b.name;
  };
  std::stable_sort(locks.begin(), locks.end(),
                   [&](const LockInfo& a, const LockInfo& b) {
                     return order.reversed ? before(b, a) : before(a, b);
                   });
}

namespace {

// The header line of top: endpoint, namespace and prefix.
std::string TopTitle(const TopScreen& screen) {
  return absl::StrCat(
      "dlock top - ", screen.endpoint, " namespace ", screen.lock_namespace,
      screen.prefix.empty() ? "" : absl::StrCat(" prefix ", screen.prefix));
}

std::string TopCounts(const TopScreen& screen) {
  return absl::StrCat(screen.locks.size(),
                      screen.locks.size() == 1 ? " lock" : " locks", " - sort ",
                      SortOrderName(screen.order), " - every ",
                      absl::FormatDuration(screen.interval));
}

std::string TopStatus(const TopScreen& screen) {
  return screen.status.empty()
             ? absl::StrCat("updated ", absl::FormatTime("%H:%M:%S", screen.now,
                                                         absl::LocalTimeZone()))
             : screen.status;
}

// One lock's cells: LOCK HOLDER TOKEN HELD-FOR LEASE-LEFT LIVE WAITERS.
std::vector<std::string> TopCells(const LockInfo& info, absl::Time now) {
  const std::optional<absl::Duration> held = HeldFor(info, now);
  // No backend reports its waiters today: "-", never a guess.
  return {info.name,
          HolderText(info),
          absl::StrCat(info.fencing_token),
          held.has_value() ? ShortDuration(*held) : "?",
          ShortDuration(info.remaining_lease),
          LiveText(info),
          "-"};
}

}  // namespace

std::string RenderTopSnapshot(const TopScreen& screen) {
  std::vector<std::vector<std::string>> rows = {
      {"LOCK", "HOLDER", "TOKEN", "HELD-FOR", "LEASE-LEFT", "LIVE", "WAITERS"}};
  for (const LockInfo& info : screen.locks) {
    rows.push_back(TopCells(info, screen.now));
  }
  return absl::StrCat(
      TopTitle(screen), "\n", TopCounts(screen), "\n", TopStatus(screen), "\n",
      AlignColumns(rows, {false, false, true, true, true, true, true}));
}

std::vector<std::string> RenderTopScreen(const TopScreen& screen, int width,
                                         int height) {
  std::vector<std::string> lines;
  if (width <= 0 || height <= 0) return lines;
  auto add = [&](absl::string_view line) {
    if (static_cast<int>(lines.size()) < height) {
      lines.push_back(Cut(line, width));
    }
  };
  add(TopTitle(screen));
  add(absl::StrCat(TopCounts(screen),
                   " - keys: n h l t sort, r reverse, q quit"));
  add(TopStatus(screen));
  const int names = std::max(2 * kMinNameWidth, width - kFixedWidth);
  // Owners (host, pid, random) are longer than most lock names.
  const int lock_width = std::max(kMinNameWidth, names * 2 / 5);
  const int holder_width = std::max(kMinNameWidth, names - lock_width);
  auto row = [&](absl::string_view lock, absl::string_view holder,
                 absl::string_view token, absl::string_view held,
                 absl::string_view lease, absl::string_view live,
                 absl::string_view waiters) {
    return absl::StrCat(
        Column(lock, lock_width), " ", Column(holder, holder_width), " ",
        RightColumn(token, kTokenWidth), " ", RightColumn(held, kHeldWidth),
        " ", RightColumn(lease, kLeaseWidth), " ",
        RightColumn(live, kLiveWidth), " ",
        RightColumn(waiters, kWaitersWidth));
  };
  add(row("LOCK", "HOLDER", "TOKEN", "HELD-FOR", "LEASE-LEFT", "LIVE",
          "WAITERS"));
  const int room = height - static_cast<int>(lines.size());
  const int count = static_cast<int>(screen.locks.size());
  // When not all fit, the last line says how many are not shown.
  const int shown = count <= room ? count : std::max(room - 1, 0);
  for (int i = 0; i < shown; ++i) {
    const std::vector<std::string> cells =
        TopCells(screen.locks[i], screen.now);
    add(row(cells[0], cells[1], cells[2], cells[3], cells[4], cells[5],
            cells[6]));
  }
  if (shown < count) {
    add(absl::StrCat("... ", count - shown,
                     " more (make the terminal taller)"));
  }
  return lines;
}

}  // namespace dlock::cli
