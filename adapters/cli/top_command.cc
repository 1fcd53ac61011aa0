// `dlock top`: lists the namespace every --interval and redraws the table
// (lock_table.h) with plain ANSI escapes in the alternate screen, the
// terminal in raw mode. Keys and signals (SIGINT, SIGTERM, SIGHUP, SIGWINCH
// through a signalfd) are polled together; every exit path restores the
// terminal. Without a terminal it prints one snapshot.
#include "top_command.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/uri.h"
#include "lock_table.h"
#include "object_text.h"

namespace dlock::cli {
namespace {

void WriteOut(absl::string_view text) {
  while (!text.empty()) {
    const ssize_t n = write(STDOUT_FILENO, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

absl::StatusOr<SortOrder> ParseSort(const std::string& text) {
  const std::pair<const char*, SortKey> kKeys[] = {
      {"name", SortKey::kName},
      {"held-for", SortKey::kHeldFor},
      {"lease-left", SortKey::kLeaseLeft},
      {"token", SortKey::kToken}};
  for (const auto& [name, key] : kKeys) {
    if (text == name) return SortOrder{key, false};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--sort: '", text,
                   "' is not a column; use name, held-for, lease-left or "
                   "token"));
}

// Raw mode and the alternate screen while alive; the terminal as it was
// afterwards, however top ends.
class RawTerminal {
 public:
  RawTerminal() {
    if (tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    // Keys one at a time, unechoed; ISIG stays so that Ctrl-C is SIGINT.
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0) return;
    active_ = true;
    // Alternate screen, cursor hidden.
    WriteOut("\x1b[?1049h\x1b[?25l");
  }
  ~RawTerminal() {
    if (!active_) return;
    WriteOut("\x1b[?25h\x1b[?1049l");
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  bool active() const { return active_; }

 private:
  termios saved_{};
  bool active_ = false;
};

class Top {
 public:
  Top(LockClient& client, const TopFlags& flags, absl::Duration interval,
      SortOrder order)
      : client_(client), flags_(flags) {
    screen_.endpoint = client.endpoint();
    screen_.lock_namespace = client.lock_namespace();
    screen_.prefix = flags.prefix;
    screen_.interval = interval;
    screen_.order = order;
  }

  // Lists once; false (with the error on the status line) if that failed.
  bool Refresh() {
    screen_.now = absl::Now();
    absl::StatusOr<std::vector<LockInfo>> locks =
        client_.Admin().List(flags_.prefix);
    if (!locks.ok()) {
      // The last good listing stays on screen, marked stale.
      screen_.status = absl::StrCat(
          "error at ",
          absl::FormatTime("%H:%M:%S", screen_.now, absl::LocalTimeZone()),
          ": ", locks.status().message(),
          screen_.locks.empty() ? "" : " (showing the last listing)");
      error_ = locks.status();
      return false;
    }
    screen_.status.clear();
    screen_.locks = *std::move(locks);
    // Readers, semaphores and elections, where the backend lists them: a
    // row each, their kind after the name.
    absl::StatusOr<std::vector<ObjectInfo>> others =
        ListObjectsBeyondWriters(client_, flags_.prefix, std::nullopt);
    if (others.ok()) {
      for (const ObjectInfo& info : *others) {
        screen_.locks.push_back(ObjectAsLockRow(info));
      }
    }
    Sort();
    return true;
  }

  void Sort() { SortLocks(screen_.locks, screen_.order, screen_.now); }

  std::vector<std::string> Lines(int width, int height) const {
    return RenderTopScreen(screen_, width, height);
  }
  std::string Snapshot() const { return RenderTopSnapshot(screen_); }

  SortOrder& order() { return screen_.order; }
  const absl::Status& error() const { return error_; }

 private:
  LockClient& client_;
  const TopFlags& flags_;
  TopScreen screen_;
  absl::Status error_;
};

void Draw(const Top& top) {
  winsize size{};
  int width = 80;
  int height = 24;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    width = size.ws_col;
    height = size.ws_row;
  }
  // Home, each line cleared to its end, the rest of the screen cleared; the
  // last line without a newline, so that a full screen does not scroll.
  std::string out = "\x1b[H";
  std::vector<std::string> lines = top.Lines(width, height);
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::StrAppend(&out, lines[i], "\x1b[K",
                    i + 1 < lines.size() ? "\r\n" : "");
  }
  absl::StrAppend(&out, "\x1b[J");
  WriteOut(out);
}

int Snapshot(Top& top) {
  if (!top.Refresh()) return Fail(top.error());
  WriteOut(top.Snapshot());
  return kOk;
}

// Until q or a signal; the exit code.
int Interactive(Top& top, absl::Duration interval, int signal_fd) {
  RawTerminal terminal;
  if (!terminal.active()) {
    return Fail(kInternal, absl::StrCat("cannot set the terminal to raw mode: ",
                                        strerror(errno), " (use --once)"));
  }
  absl::Time next = absl::InfinitePast();
  bool redraw = true;
  while (true) {
    if (absl::Now() >= next) {
      top.Refresh();
      next = absl::Now() + interval;
      redraw = true;
    }
    if (redraw) Draw(top);
    redraw = false;
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    const int64_t ms = absl::ToInt64Milliseconds(
        absl::Ceil(next - absl::Now(), absl::Milliseconds(1)));
    if (poll(fds, 2, static_cast<int>(std::max<int64_t>(ms, 0))) <= 0) {
      continue;
    }
    if (fds[1].revents & POLLIN) {
      while (int sig = ReadSignal(signal_fd)) {
        if (sig == SIGWINCH) {
          redraw = true;
        } else {
          return 128 + sig;
        }
      }
    }
    if (fds[0].revents & (POLLHUP | POLLERR)) return kOk;
    if (fds[0].revents & POLLIN) {
      char keys[64];
      const ssize_t n = read(STDIN_FILENO, keys, sizeof(keys));
      for (ssize_t i = 0; i < n; ++i) {
        if (keys[i] == 'q' || keys[i] == 'Q') return kOk;
        if (std::optional<SortOrder> order =
                ApplySortKey(top.order(), keys[i])) {
          top.order() = *order;
          top.Sort();
          redraw = true;
        }
      }
    }
  }
}

}  // namespace

void AddTopFlags(CLI::App& command, TopFlags& flags) {
  command.add_option("--prefix", flags.prefix,
                     "Only locks whose names start with this");
  command.add_option("--interval", flags.interval, "Time between refreshes")
      ->capture_default_str();
  command
      .add_option("--sort", flags.sort,
                  "First sort: name, held-for, lease-left or token")
      ->capture_default_str();
  command.add_flag("--once", flags.once,
                   "Print one table and exit (what top does without a "
                   "terminal)");
}

int TopCommand(const BackendFlags& backend, const TopFlags& flags) {
  absl::StatusOr<absl::Duration> interval =
      DurationFlag("--interval", flags.interval, kIntervalRange);
  if (!interval.ok()) return Fail(interval.status());
  absl::StatusOr<SortOrder> order = ParseSort(flags.sort);
  if (!order.ok()) return Fail(order.status());
  const bool interactive =
      !flags.once && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  // Before connecting, so that the client's threads inherit the mask.
  const int signal_fd =
      interactive ? BlockedSignalFd({SIGINT, SIGTERM, SIGHUP, SIGWINCH}) : -1;
  if (interactive && signal_fd < 0) {
    return Fail(kInternal, absl::StrCat("signalfd: ", strerror(errno)));
  }
  int code = kOk;
  std::unique_ptr<LockClient> client =
      ConnectForListingOrFail(backend, "dlock top", code);
  if (client == nullptr) return code;
  Top top(*client, flags, *interval, *order);
  code = interactive ? Interactive(top, *interval, signal_fd) : Snapshot(top);
  client->Close().IgnoreError();  // it holds nothing
  if (signal_fd >= 0) close(signal_fd);
  return code;
}

}  // namespace dlock::cli
