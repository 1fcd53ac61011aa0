// The `dlock` command-line tool. See docs/cli.md.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "admin_commands.h"
#include "app_text.h"
#include "bench_command.h"
#include "cli_common.h"
#include "dlock/semaphore.h"
#include "election_commands.h"
#include "monitor_command.h"
#include "run_command.h"
#include "setup_command.h"
#include "top_command.h"

namespace dlock::cli {
namespace {

constexpr char kExamples[] = R"(
Backends: --backend URI, --profile NAME (with --config FILE or $DLOCK_CONFIG),
or $DLOCK_BACKEND. Durations: 500ms, 30s, 2m, 1h, 1d, 1h30m.

Examples:
  dlock run --backend redis://127.0.0.1:6379 --wait 30s nightly-report -- ./report.sh
  DLOCK_BACKEND=redis://cache:6379 dlock run --wait 0 deploy -- make deploy
  dlock status --profile prod --config /etc/dlock.toml nightly-report
  dlock list --prefix nightly- --json
  dlock unlock --force nightly-report
  dlock run --permits 4 encoders -- ./encode.sh
  dlock elect --value 10.0.0.7:8080 scheduler -- ./scheduler
  dlock leader --json scheduler
  dlock top --backend redis://cache:6379
  dlock monitor --held-longer-than 10m --on-held-too-long ./page.sh
  dlock bench --backend redis://cache:6379 --backend zk://zk1:2181
  dlock setup --backend postgres://admin@db/app --grant-to app_user

Exit codes: 0 success (run: the command's status), 64 usage error,
69 backend unreachable, 75 lock not acquired within --wait (a job: another
process runs it), 76 lock lost while the command ran, 77 the backend refused
the credentials or a right, or a semaphore's N (do not retry), 79 a job's
slot already ran, 126/127 command not executable/not found, 128+N killed by
signal N, 1 other backend error.

dlock help SUBCOMMAND shows a subcommand's options; dlock version what this
build has. See docs/cli.md.)";

// `dlock run NAME CMD -FLAG` without "--": CLI11 read -FLAG as dlock's.
int UsageError(const CLI::ParseError& e, const CLI::App& run_cmd, int argc,
               char** argv) {
  const bool extras = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;
  if (extras && argc > 1 && std::string(argv[1]) == "run") {
    return Fail(
        kUsage,
        DoubleDashHint(run_cmd, std::vector<std::string>(argv + 2, argv + argc),
                       run_cmd.remaining()));
  }
  return Fail(kUsage, absl::StrCat(e.what(), " (see dlock --help)"));
}

// `dlock help [SUBCOMMAND]`, and `dlock help --man`: the text --help prints
// (App::help() would show the help of `help`, the subcommand parsed).
int HelpCommand(const CLI::App& app, const std::string& topic, bool man) {
  if (man) {
    std::fputs(ManPage(app).c_str(), stdout);
    return kOk;
  }
  if (topic.empty()) {
    std::fputs(app.get_formatter()
                   ->make_help(&app, "dlock", CLI::AppFormatMode::Normal)
                   .c_str(),
               stdout);
    return kOk;
  }
  for (const CLI::App* command : app.get_subcommands({})) {
    if (command->get_name() == topic) {
      std::fputs(command->get_formatter()
                     ->make_help(command, absl::StrCat("dlock ", topic),
                                 CLI::AppFormatMode::Normal)
                     .c_str(),
                 stdout);
      return kOk;
    }
  }
  return Fail(kUsage, absl::StrCat("no subcommand '", topic,
                                   "'; dlock help lists them"));
}

// Every subcommand's flags and arguments, filled in by the parse.
struct Args {
  BackendFlags backend;
  RunFlags run;
  std::string name;    // status, unlock
  std::string prefix;  // list
  bool force = false;  // unlock
  uint64_t token = 0;  // unlock
  TopFlags top;
  MonitorFlags monitor;
  BenchFlags bench;
  std::string grant_to;  // setup
  std::string value;     // elect
  bool watch = false;    // leader
  std::string kind;      // list, unlock
  // run, elect: what follows `--`, when given (docs/cli.md).
  std::optional<std::vector<std::string>> after_double_dash;
  std::string help_topic;
  bool help_man = false;
};

// The flags `dlock run` and `dlock elect` share: the wait, the lease, what
// happens on a loss, the command's environment.
void AddSupervisionFlags(CLI::App& cmd, RunFlags& run) {
  cmd.add_option("--wait", run.wait,
                 "How long to wait for the lock: 0 (one try), forever, or a "
                 "duration (default: forever, or the profile's "
                 "default_wait)");
  cmd.add_option("--lease", run.lease,
                 "Lease renewed by the watchdog while the command runs; if "
                 "dlock dies the lock frees within it (default 30s)");
  cmd.add_option("--on-lost-signal", run.on_lost_signal,
                 "Signal sent to the command if the lock is lost")
      ->capture_default_str();
  cmd.add_option("--kill-after", run.kill_after,
                 "After a loss, SIGKILL the command if it is still running "
                 "this long after the signal")
      ->capture_default_str();
  cmd.add_option("--pass-env", run.pass_env,
                 "Give the command this variable all the same, though it "
                 "holds a secret of the backend's (DLOCK_BACKEND, the "
                 "profile's password_env: withheld by default); repeatable")
      ->expected(1)
      ->allow_extra_args(false)  // the lock name follows
      ->take_all();
  cmd.add_flag("--quiet", run.quiet,
               "No notice on stderr while waiting for a held lock");
  // Before `--`, the names; without `--`, the first is the name and the
  // rest the command (see SplitCommand).
  cmd.add_option("name", run.names,
                 "Lock name (several with --all), then -- and the command "
                 "with its arguments")
      ->required();
}

CLI::App* AddRun(CLI::App& app, Args& a) {
  RunFlags& run = a.run;
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run a command while holding a lock, like flock(1) across machines");
  AddBackendFlags(*cmd, a.backend, /*json=*/false);
  cmd->add_option("--once-per", run.once_per,
                  "Scheduled job: run at most once per slot of this period "
                  "(1h, 15m, 1d), slots aligned on UTC");
  cmd->add_option("--slot", run.slot,
                  "Scheduled job: run at most once for this slot name");
  cmd->add_option("--at-least-for", run.at_least_for,
                  "Scheduled job: keep others out this long after the start, "
                  "however soon the command ends");
  cmd->add_option("--at-most-for", run.at_most_for,
                  "Scheduled job: stop a run that lasts longer, and let "
                  "others in (default with --once-per: the period)");
  cmd->add_flag("--quiet-skip", run.quiet_skip,
                "Scheduled job: a skipped run prints nothing and exits 0");
  cmd->add_flag("--shared", run.shared,
                "Hold the lock shared, as one of its readers (dlock run NAME "
                "is its writer)");
  cmd->add_option("--permits", run.permits,
                  "Hold a permit of semaphore NAME of N permits: at most N "
                  "commands at once")
      ->check(CLI::Range(int64_t{1}, kMaxSemaphorePermits));
  cmd->add_option("--take", run.take,
                  "With --permits: take K of the N permits at once "
                  "(default 1)")
      ->check(CLI::Range(int64_t{1}, kMaxSemaphorePermits));
  cmd->add_flag("--all", run.all,
                "Take every NAME before -- or none, without deadlock");
  AddSupervisionFlags(*cmd, run);
  cmd->footer(
      "\nExample:\n  dlock run --backend redis://127.0.0.1:6379 --wait 10s "
      "--lease 15s backup -- /usr/local/bin/backup.sh --full\n"
      "The command sees DLOCK_LOCK_NAME and DLOCK_FENCING_TOKEN, and not\n"
      "DLOCK_BACKEND or the profile's password_env unless --pass-env names "
      "it.\n"
      "\nA scheduled job, once per hour across every machine whose cron "
      "starts it:\n  dlock run --once-per 1h --at-least-for 5m --quiet-skip "
      "hourly-report -- ./report.sh\n"
      "\nAt most 4 at once, a reader, two locks together:\n"
      "  dlock run --permits 4 encoders -- ./encode.sh\n"
      "  dlock run --shared catalog -- ./read-catalog.sh\n"
      "  dlock run --all accounts/a accounts/b -- ./transfer.sh");
  return cmd;
}

CLI::App* AddElect(CLI::App& app, Args& a) {
  CLI::App* cmd = app.add_subcommand(
      "elect",
      "Run a command while leader of an election; stop it if leadership is "
      "lost");
  AddBackendFlags(*cmd, a.backend, /*json=*/false);
  cmd->add_option("--value", a.value,
                  "What the leader announces, e.g. its address (default: "
                  "<hostname>:<pid>)");
  AddSupervisionFlags(*cmd, a.run);
  cmd->footer(
      "\nExample:\n  dlock elect --value 10.0.0.7:8080 scheduler -- "
      "./scheduler\nThe command sees DLOCK_ELECTION, DLOCK_LEADER_TERM and "
      "DLOCK_LEADER_VALUE.");
  return cmd;
}

CLI::App* AddLeader(CLI::App& app, Args& a) {
  CLI::App* cmd = app.add_subcommand(
      "leader", "Show who leads an election, its value and term");
  AddBackendFlags(*cmd, a.backend, /*json=*/true);
  cmd->add_flag("--watch", a.watch,
                "Print a line per change until interrupted");
  cmd->add_option("name", a.name, "Election name")->required();
  cmd->footer("\nExample:\n  dlock leader --json --watch scheduler");
  return cmd;
}

CLI::App* AddStatus(CLI::App& app, Args& a) {
  CLI::App* cmd = app.add_subcommand(
      "status",
      "Show who holds a lock, whether the holder is live, and a scheduled "
      "job's slots");
  AddBackendFlags(*cmd, a.backend, /*json=*/true);
  cmd->add_option("name", a.name, "Lock name (or a scheduled job's name)")
      ->required();
  cmd->footer("\nExample:\n  dlock status --json nightly-report");
  return cmd;
}

CLI::App* AddList(CLI::App& app, Args& a) {
  CLI::App* cmd = app.add_subcommand(
      "list", "List the locks held (where the backend can list)");
  AddBackendFlags(*cmd, a.backend, /*json=*/true);
  cmd->add_option("--prefix", a.prefix, "Only names starting with this");
  cmd->add_option("--kind", a.kind,
                  "Only objects of this kind: lock, semaphore or election "
                  "(default: every kind the backend offers)");
  cmd->footer("\nExample:\n  dlock list --prefix nightly-");
  return cmd;
}

CLI::App* AddUnlock(CLI::App& app, Args& a) {
  CLI::App* cmd = app.add_subcommand(
      "unlock", "Remove a lock whoever holds it (administrators)");
  AddBackendFlags(*cmd, a.backend, /*json=*/true);
  cmd->add_flag("--force", a.force, "Required: the holder loses the lock");
  cmd->add_option("--token", a.token,
                  "Only if still held with this fencing token (as status "
                  "showed it): never removes a holder that took the lock "
                  "over since")
      ->check(CLI::Range(uint64_t{1}, std::numeric_limits<uint64_t>::max()));
  cmd->add_option("--kind", a.kind,
                  "The kind of object NAME is: lock (default; its writer "
                  "and readers), semaphore or election");
  cmd->add_option("name", a.name, "Lock name")->required();
  cmd->footer(
      "\nExample:\n  dlock unlock --force nightly-report\n  dlock unlock "
      "--force --token 41 nightly-report");
  return cmd;
}

CLI::App* AddTop(CLI::App& app, Args& a) {
  CLI::App* cmd = app.add_subcommand(
      "top", "Live table of the locks held; n h l t sort, r reverses, q quits");
  AddBackendFlags(*cmd, a.backend, /*json=*/false);
  AddTopFlags(*cmd, a.top);
  cmd->footer(
      "\nExample:\n  dlock top --backend redis://127.0.0.1:6379 --prefix "
      "reports/\nWithout a terminal (or with --once) it prints one table.");
  return cmd;
}

CLI::App* AddMonitor(CLI::App& app, Args& a) {
  CLI::App* cmd = app.add_subcommand(
      "monitor",
      "Watch the locks as a service: held too long, dead holders, metrics");
  AddBackendFlags(*cmd, a.backend, /*json=*/false);
  AddMonitorFlags(*cmd, a.monitor);
  cmd->footer(
      "\nExample:\n  dlock monitor --backend redis://127.0.0.1:6379 "
      "--held-longer-than 15m --on-held-too-long /usr/local/bin/page.sh "
      "--metrics-listen 127.0.0.1:9464\nRuns until SIGINT or SIGTERM; one "
      "log line per event on stdout. See docs/cli.md.");
  return cmd;
}

CLI::App* AddBench(CLI::App& app, Args& a) {
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure backends side by side on your own servers");
  AddBenchFlags(*cmd, a.bench);
  cmd->footer(
      "\nExample:\n  dlock bench --quick --backend redis://cache:6379 "
      "--backend zk://zk1:2181\n  dlock bench --backend redis://cache:6379 "
      "--threads 1,16 --duration 5s\n"
      "Runs in namespace dlock-bench under names of its own, and releases "
      "what it took. See docs/cli.md.");
  return cmd;
}

CLI::App* AddSetup(CLI::App& app, Args& a) {
  CLI::App* cmd = app.add_subcommand(
      "setup",
      "Create or migrate what dlock keeps on the server (PostgreSQL's lock "
      "tables), as a user allowed to create tables");
  AddBackendFlags(*cmd, a.backend, /*json=*/false);
  cmd->add_option("--grant-to", a.grant_to,
                  "PostgreSQL: grant this role what dlock needs on them");
  cmd->footer(
      "\nExample:\n  dlock setup --backend postgres://admin@db/app "
      "--grant-to app_user\nApplications then connect as app_user, which "
      "may not create tables. See docs/postgres.md.");
  return cmd;
}

CLI::App* AddHelp(CLI::App& app, Args& a) {
  CLI::App* cmd =
      app.add_subcommand("help", "Show the help of dlock or of a subcommand");
  cmd->add_option("subcommand", a.help_topic, "A subcommand, e.g. run");
  cmd->add_flag("--man", a.help_man,
                "Print the manual page, dlock(1), in roff");
  return cmd;
}

// `dlock run` and `dlock elect` take their command after `--`: what
// follows it goes to the command untouched and the rest to CLI11, so that
// the names before it can be several (--all). Without `--`, CLI11 sees all,
// and the first name is the name, the rest the command (as flock(1) does).
std::vector<std::string> SplitCommand(int argc, char** argv, Args& a) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || (args[0] != "run" && args[0] != "elect")) return args;
  auto dash = std::find(args.begin(), args.end(), "--");
  if (dash != args.end()) {
    a.after_double_dash.emplace(dash + 1, args.end());
    args.erase(dash, args.end());
  }
  return args;
}

void SetNamesAndCommand(Args& a) {
  RunFlags& run = a.run;
  if (a.after_double_dash.has_value()) {
    run.command = *a.after_double_dash;
    run.double_dash = true;
  } else if (run.names.size() > 1) {
    run.command.assign(run.names.begin() + 1, run.names.end());
    run.names.resize(1);
  }
  if (!run.names.empty()) run.name = run.names.front();
}

int Main(int argc, char** argv) {
  CLI::App app("distributed locks from the shell", "dlock");
  app.footer(kExamples);
  app.require_subcommand(1);
  app.set_version_flag("--version", VersionText,
                       "Print the version, the backends and client libraries "
                       "of this build");
  Args a;
  CLI::App* run = AddRun(app, a);
  CLI::App* elect = AddElect(app, a);
  CLI::App* leader = AddLeader(app, a);
  CLI::App* status = AddStatus(app, a);
  CLI::App* list = AddList(app, a);
  CLI::App* unlock = AddUnlock(app, a);
  CLI::App* top = AddTop(app, a);
  CLI::App* monitor = AddMonitor(app, a);
  CLI::App* bench = AddBench(app, a);
  CLI::App* setup = AddSetup(app, a);
  CLI::App* help = AddHelp(app, a);
  CLI::App* version = app.add_subcommand(
      "version", "Print the version, the backends and client libraries");
  const std::vector<std::string> args = SplitCommand(argc, argv, a);
  try {
    app.parse(std::vector<std::string>(args.rbegin(), args.rend()));
  } catch (const CLI::CallForVersion& e) {
    std::fputs(e.what(), stdout);
    return kOk;
  } catch (const CLI::CallForHelp&) {
    // Prints the help of the subcommand given, if any.
    std::fputs(app.help().c_str(), stdout);
    return kOk;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return kOk;
  } catch (const CLI::ParseError& e) {
    return UsageError(e, *run, argc, argv);
  }
  if (run->parsed() || elect->parsed()) SetNamesAndCommand(a);
  if (run->parsed()) return RunCommand(a.backend, a.run);
  if (elect->parsed()) return ElectCommand(a.backend, a.run, a.value);
  if (leader->parsed()) return LeaderCommand(a.backend, a.name, a.watch);
  if (status->parsed()) return StatusCommand(a.backend, a.name);
  if (list->parsed()) return ListCommand(a.backend, a.prefix, a.kind);
  if (unlock->parsed()) {
    return UnlockCommand(a.backend, a.name, a.force, a.token, a.kind);
  }
  if (bench->parsed()) return BenchCommand(a.bench);
  if (top->parsed()) return TopCommand(a.backend, a.top);
  if (monitor->parsed()) return MonitorCommand(a.backend, a.monitor);
  if (setup->parsed()) return SetupCommand(a.backend, a.grant_to);
  if (help->parsed()) return HelpCommand(app, a.help_topic, a.help_man);
  if (version->parsed()) {
    std::fputs(VersionText().c_str(), stdout);
    return kOk;
  }
  return Fail(kUsage, "give a subcommand; dlock help lists them");
}

}  // namespace
}  // namespace dlock::cli

int main(int argc, char** argv) { return dlock::cli::Main(argc, argv); }
