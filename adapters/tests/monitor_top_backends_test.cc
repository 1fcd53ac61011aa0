// `dlock monitor` and `dlock top` against every server backend of this build
// (backend_servers.h), with the locks held by `dlock run` in other
// processes: the monitor's held-too-long report, hook, metrics and stop;
// `--unlock-dead` leaving live holders alone; `unlock --token`; and top in a
// real terminal (tmux), sorted by keys, resized, quit and interrupted.
#include <signal.h>

#include <atomic>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "backend_servers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "status_testing.h"
#include "test_util.h"

namespace dlock {
namespace {

using test::Dlock;
using test::Process;
using test::Result;
using test::RunProcess;
using ::testing::HasSubstr;
using ::testing::Not;

// Bounds that catch a hang, not timing: scans run every 200 ms.
constexpr absl::Duration kSeen = absl::Seconds(15);

class MonitorTopTest : public ::testing::TestWithParam<test::ServerBackend> {
 protected:
  void SetUp() override {
    static std::atomic<int> n{0};
    ns_ = absl::StrCat("mon", getpid() % 10000, "x", n++);
    absl::StatusOr<std::string> dir = test::MakeTempDir("dlock-monitor");
    ASSERT_OK(dir);
    dir_ = *dir;
  }
  void TearDown() override { test::RemoveTree(dir_); }

  std::string Uri() const { return GetParam().uri(ns_); }
  std::vector<std::string> Env() const {
    return {absl::StrCat("DLOCK_BACKEND=", Uri())};
  }
  Result Dl(std::vector<std::string> args) {
    return RunProcess(Dlock(std::move(args)), Env(), absl::Seconds(60));
  }
  std::unique_ptr<Process> Start(std::vector<std::string> args) {
    return std::make_unique<Process>(Dlock(std::move(args)), Env());
  }
  // A `dlock run` holding `name` until signalled; returns once it holds it.
  std::unique_ptr<Process> Hold(const std::string& name,
                                const std::string& lease = "30s") {
    std::unique_ptr<Process> run =
        Start({"run", "--lease", lease, name, "--", "sleep", "60"});
    Await(
        [&] {
          return absl::StrContains(Dl({"status", name}).out, "locked");
        },
        name + " held");
    return run;
  }
  uint64_t TokenOf(const std::string& name) {
    const std::string json = Dl({"status", "--json", name}).out;
    const size_t at = json.find("\"fencing_token\":");
    uint64_t token = 0;
    if (at == std::string::npos) return 0;
    std::string digits;
    for (size_t i = at + 16; i < json.size() && isdigit(json[i]); ++i) {
      digits.push_back(json[i]);
    }
    EXPECT_TRUE(absl::SimpleAtoi(digits, &token)) << json;
    return token;
  }
  // `context`: what to print if it never happens (the screen, a log).
  static void Await(const std::function<bool()>& ready, const std::string& what,
                    const std::function<std::string()>& context = nullptr) {
    ASSERT_OK(test::WaitUntil(ready, kSeen, what))
        << "waiting for " << what << "\n"
        << (context ? context() : "");
  }

  std::string ns_;
  std::string dir_;
};

// The lines of `text` that contain `needle`.
int CountLines(const std::string& text, absl::string_view needle) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, needle)) ++n;
  }
  return n;
}

// GET /metrics from the monitor, whose start line names the port.
std::string ScrapeMetrics(const std::string& monitor_out) {
  const size_t at = monitor_out.find("metrics=127.0.0.1:");
  if (at == std::string::npos) return "";
  int port = 0;
  absl::string_view rest = absl::string_view(monitor_out).substr(at + 18);
  if (!absl::SimpleAtoi(rest.substr(0, rest.find('/')), &port)) return "";
  absl::StatusOr<std::string> reply = test::TcpExchange(
      port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", absl::Seconds(5));
  return reply.ok() ? *reply : "";
}

TEST_P(MonitorTopTest, MonitorReportsAHoldOverTheThresholdOnceAndRunsTheHook) {
  std::unique_ptr<Process> holder = Hold("reports/nightly");
  const uint64_t token = TokenOf("reports/nightly");
  ASSERT_GT(token, 0u);
  const std::string hook_log = dir_ + "/hook.log";
  std::unique_ptr<Process> monitor =
      Start({"monitor", "--interval", "200ms", "--held-longer-than", "500ms",
             "--on-held-too-long",
             absl::StrCat("env | grep '^DLOCK_' | sort >> ", hook_log,
                          "; echo end-of-run >> ", hook_log),
             "--metrics-listen", "127.0.0.1:0"});
  Await([&] { return absl::StrContains(monitor->out(), "hook-ran"); },
        "the hook to run");
  const std::string out = monitor->out();
  EXPECT_THAT(out,
              HasSubstr(absl::StrCat("held-too-long name=\"reports/nightly\" "
                                     "owner=\"t:dlock-run:")));
  EXPECT_THAT(out, HasSubstr(absl::StrCat("fencing_token=", token)));
  EXPECT_THAT(out, HasSubstr("threshold=500ms"));

  // The hook saw the lock's facts, and not the backend URI.
  const std::string env = test::ReadFileOrEmpty(hook_log);
  EXPECT_THAT(env, HasSubstr("DLOCK_LOCK_NAME=reports/nightly\n"));
  EXPECT_THAT(env, HasSubstr("DLOCK_LOCK_OWNER=t:dlock-run:"));
  EXPECT_THAT(env,
              HasSubstr(absl::StrCat("DLOCK_FENCING_TOKEN=", token, "\n")));
  EXPECT_THAT(env, HasSubstr("DLOCK_HELD_FOR_SECONDS="));
  EXPECT_THAT(env, HasSubstr(absl::StrCat("DLOCK_NAMESPACE=", ns_, "\n")));
  EXPECT_THAT(env, HasSubstr("DLOCK_ENDPOINT="));
  EXPECT_THAT(env, Not(HasSubstr("DLOCK_BACKEND=")));

  const std::string metrics = ScrapeMetrics(out);
  EXPECT_THAT(metrics, HasSubstr("HTTP/1.1 200 OK"));
  EXPECT_THAT(metrics,
              HasSubstr(absl::StrCat("dlock_monitor_held_too_long{namespace=\"",
                                     ns_, "\"} 1\n")));
  EXPECT_THAT(metrics,
              HasSubstr(absl::StrCat("dlock_monitor_locks_held{namespace=\"",
                                     ns_, "\"} 1\n")));
  EXPECT_THAT(metrics, HasSubstr("dlock_monitor_hook_runs_total{namespace="));
  // Beside its own, the monitor serves its client's metrics: its scans.
  EXPECT_THAT(metrics, HasSubstr(absl::StrCat(
                           "dlock_backend_call_seconds_count{namespace=\"", ns_,
                           "\",operation=\"list\"}")));

  // Five more scans: still held, not reported again, the hook not rerun.
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(CountLines(monitor->out(), "held-too-long name="), 1)
      << monitor->out();
  EXPECT_EQ(CountLines(test::ReadFileOrEmpty(hook_log), "end-of-run"), 1);

  // Released: reported once more.
  holder->Signal(SIGTERM);
  holder->Wait();
  Await(
      [&] {
        return absl::StrContains(monitor->out(),
                                 "held-too-long-ended reason=released "
                                 "name=\"reports/nightly\"");
      },
      "the release to be reported");
  EXPECT_THAT(ScrapeMetrics(monitor->out()),
              HasSubstr(absl::StrCat("dlock_monitor_held_too_long{namespace=\"",
                                     ns_, "\"} 0\n")));

  const absl::Time stopped = absl::Now();
  monitor->Signal(SIGTERM);
  EXPECT_EQ(monitor->Wait(absl::Seconds(10)), 0) << monitor->err();
  EXPECT_LT(absl::Now() - stopped, absl::Seconds(5));
  EXPECT_THAT(monitor->out(), HasSubstr("monitor-stopped"));
}

TEST_P(MonitorTopTest, AHookThatHangsIsKilledAndTheMonitorGoesOn) {
  std::unique_ptr<Process> holder = Hold("stuck");
  std::unique_ptr<Process> monitor =
      Start({"monitor", "--interval", "200ms", "--held-longer-than", "200ms",
             "--on-held-too-long", "exec sleep 60", "--hook-timeout", "500ms"});
  Await(
      [&] {
        return absl::StrContains(monitor->out(), "hook-failed name=\"stuck\"");
      },
      "the hook to time out");
  EXPECT_THAT(monitor->out(), HasSubstr("reason=\"timed out after 500ms\""));
  holder->Signal(SIGTERM);
  holder->Wait();
  Await([&] { return absl::StrContains(monitor->out(), "reason=released"); },
        "scans to go on");
  monitor->Signal(SIGINT);
  EXPECT_EQ(monitor->Wait(absl::Seconds(10)), 0);
}

TEST_P(MonitorTopTest, UnlockDeadLeavesLiveHoldersAlone) {
  std::unique_ptr<Process> holder = Hold("alive");
  const uint64_t token = TokenOf("alive");
  std::unique_ptr<Process> monitor =
      Start({"monitor", "--interval", "200ms", "--unlock-dead"});
  Await([&] { return absl::StrContains(monitor->out(), "monitor-started"); },
        "the monitor to start");
  absl::SleepFor(absl::Seconds(1));  // five scans
  EXPECT_THAT(monitor->out(), Not(HasSubstr("unlocked-dead-holder")));
  EXPECT_EQ(TokenOf("alive"), token);
  monitor->Signal(SIGTERM);
  EXPECT_EQ(monitor->Wait(absl::Seconds(10)), 0);
  holder->Signal(SIGTERM);
  holder->Wait();
}

TEST_P(MonitorTopTest, UnlockOnATokenRemovesOnlyThatHold) {
  // A short lease, so that the run learns of the loss at its next renewal.
  std::unique_ptr<Process> holder = Hold("job", "1s");
  const uint64_t token = TokenOf("job");
  Result wrong =
      Dl({"unlock", "--force", "--token", absl::StrCat(token + 1), "job"});
  EXPECT_EQ(wrong.code, 1);
  test::ExpectOneLine(wrong);
  EXPECT_THAT(wrong.err, HasSubstr(absl::StrCat("fencing token ", token + 1)));
  EXPECT_EQ(TokenOf("job"), token);
  Result right =
      Dl({"unlock", "--force", "--token", absl::StrCat(token), "job"});
  EXPECT_EQ(right.code, 0) << right.err;
  EXPECT_EQ(holder->Wait(), 76);  // the run was told it lost the lock
}

TEST_P(MonitorTopTest, TopWithoutATerminalPrintsOneTable) {
  std::unique_ptr<Process> a = Hold("alpha");
  std::unique_ptr<Process> b = Hold("beta");
  Result top = Dl({"top", "--sort", "name"});
  EXPECT_EQ(top.code, 0) << top.err;
  std::vector<std::string> lines =
      absl::StrSplit(top.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 6u) << top.out;
  EXPECT_TRUE(absl::EndsWith(lines[0], absl::StrCat(" namespace ", ns_)))
      << top.out;
  EXPECT_TRUE(absl::StartsWith(lines[1], "2 locks - sort name")) << top.out;
  EXPECT_TRUE(absl::StartsWith(lines[4], "alpha ")) << top.out;
  EXPECT_TRUE(absl::StartsWith(lines[5], "beta ")) << top.out;
  a->Signal(SIGTERM);
  b->Signal(SIGTERM);
}

// A tmux server of its own (-L), killed at the end.
class Tmux {
 public:
  explicit Tmux(const std::string& socket) : socket_(socket) {}
  ~Tmux() { Run({"kill-server"}); }
  Result Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/tmux", "-L", socket_});
    return RunProcess(args, {}, absl::Seconds(10));
  }
  std::string Screen() { return Run({"capture-pane", "-p", "-t", "top"}).out; }
  void Keys(const std::string& keys) { Run({"send-keys", "-t", "top", keys}); }

 private:
  std::string socket_;
};

// The lock names in the table's rows, top to bottom.
std::vector<std::string> RowNames(const std::string& screen) {
  std::vector<std::string> names;
  bool rows = false;
  for (absl::string_view line : absl::StrSplit(screen, '\n')) {
    if (absl::StartsWith(line, "LOCK ")) {
      rows = true;
      continue;
    }
    if (!rows || line.empty()) continue;
    names.emplace_back(line.substr(0, line.find(' ')));
  }
  return names;
}

TEST_P(MonitorTopTest, TopInATerminalSortsResizesAndQuits) {
  ASSERT_OK(test::RequireExecutable("/usr/bin/tmux", "tmux"));
  // Held in this order: held-for sorts them so, token the other way.
  std::vector<std::unique_ptr<Process>> holders;
  for (const char* name : {"b-first", "c-second", "a-third"}) {
    holders.push_back(Hold(name));
  }
  Tmux tmux(absl::StrCat("dlock-top-", getpid(), "-", ns_));
  const std::string top = absl::StrCat(
      test::kCliPath, " top --interval 300ms --backend '", Uri(), "'");
  // Two runs of top: the first quits with q, the second is interrupted;
  // then the shell shows their exit codes and the terminal's mode. The
  // second starts on Enter: on the alternate screen it would hide the first
  // one's exit code from a test that looked a moment too late.
  // The shell catches SIGINT (a trap, reset to the default in top) so that
  // Ctrl-C, sent to the whole process group, ends only top.
  const std::string script = absl::StrCat(
      "trap true INT; ", top, "; echo \"first-exit=$?\"; read go; ", top,
      "; echo \"second-exit=$?\"; stty -a | tr ' ;' '\\n\\n' | "
      "grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; "
      "echo; sleep 60");
  ASSERT_EQ(tmux.Run({"new-session", "-d", "-s", "top", "-x", "120", "-y", "30",
                      "sh", "-c", script})
                .code,
            0);
  Await([&] { return RowNames(tmux.Screen()).size() == 3; },
        "top to show three rows", [&] { return tmux.Screen(); });
  std::string screen = tmux.Screen();
  EXPECT_THAT(screen, HasSubstr("sort held-for"));
  EXPECT_THAT(RowNames(screen),
              ::testing::ElementsAre("b-first", "c-second", "a-third"))
      << screen;
  EXPECT_THAT(screen, HasSubstr("LOCK "));
  EXPECT_THAT(screen, HasSubstr("t:dlock-run:"));

  const std::vector<std::pair<std::string, std::vector<std::string>>> sorts = {
      {"n", {"a-third", "b-first", "c-second"}},
      {"r", {"c-second", "b-first", "a-third"}},
      {"t", {"b-first", "c-second", "a-third"}},  // reversed: oldest first
      {"r", {"a-third", "c-second", "b-first"}},  // newest first
  };
  for (const auto& [key, order] : sorts) {
    tmux.Keys(key);
    Await([&, order = order] { return RowNames(tmux.Screen()) == order; },
          absl::StrCat("the order after '", key, "'"));
  }

  // Smaller than the table: rows and columns cut to fit (SIGWINCH).
  tmux.Run({"resize-window", "-t", "top", "-x", "50", "-y", "6"});
  Await([&] { return absl::StrContains(tmux.Screen(), "... 2 more"); },
        "the table to fit 6 lines", [&] { return tmux.Screen(); });
  for (absl::string_view line : absl::StrSplit(tmux.Screen(), '\n')) {
    EXPECT_LE(line.size(), 50u) << line;
  }
  tmux.Run({"resize-window", "-t", "top", "-x", "120", "-y", "30"});

  tmux.Keys("q");
  Await([&] { return absl::StrContains(tmux.Screen(), "first-exit=0"); },
        "top to quit on q");
  tmux.Keys("Enter");
  // The second top: Ctrl-C ends it (128 + SIGINT) and restores the terminal.
  Await([&] { return RowNames(tmux.Screen()).size() == 3; },
        "the second top to draw");
  tmux.Keys("C-c");
  Await([&] { return absl::StrContains(tmux.Screen(), "second-exit=130"); },
        "top to end on Ctrl-C", [&] { return tmux.Screen(); });
  Await([&] { return absl::StrContains(tmux.Screen(), "icanon echo"); },
        "the terminal's mode", [&] { return tmux.Screen(); });
  EXPECT_THAT(tmux.Screen(), Not(HasSubstr("-icanon")));
  // Left the alternate screen: the shell's lines are on the normal one.
  EXPECT_THAT(tmux.Screen(), Not(HasSubstr("LOCK ")));
  for (auto& holder : holders) holder->Signal(SIGTERM);
}

INSTANTIATE_TEST_SUITE_P(Backends, MonitorTopTest,
                         ::testing::ValuesIn(test::ServerBackends()),
                         test::ServerBackendName);

}  // namespace
}  // namespace dlock
