// The `dlock` command-line tool. See docs/cli.md.
#include <cstdint>
#include <limits>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "admin_commands.h"
#include "bench_command.h"
#include "cli_common.h"
#include "monitor_command.h"
#include "run_command.h"
#include "setup_command.h"
#include "top_command.h"

namespace dlock::cli {
namespace {

constexpr char kExamples[] = R"(
Backends: --backend URI, --profile NAME (with --config FILE or $DLOCK_CONFIG),
or $DLOCK_BACKEND. Durations: 500ms, 30s, 2m, 1h.

Examples:
  dlock run --backend redis://127.0.0.1:6379 --wait 30s nightly-report -- ./report.sh
  DLOCK_BACKEND=redis://cache:6379 dlock run --wait 0 deploy -- make deploy
  dlock status --profile prod --config /etc/dlock.toml nightly-report
  dlock list --prefix nightly- --json
  dlock unlock --force nightly-report
  dlock top --backend redis://cache:6379
  dlock monitor --held-longer-than 10m --on-held-too-long ./page.sh
  dlock bench --backend redis://cache:6379 --backend zk://zk1:2181
  dlock setup --backend postgres://admin@db/app --grant-to app_user

Exit codes: 0 success (run: the command's status), 64 usage error,
69 backend unreachable, 75 lock not acquired within --wait (a job: another
process runs it), 76 lock lost while the command ran, 79 a job's slot already
ran, 126/127 command not executable/not found, 128+N
killed by signal N, 1 other backend error. See docs/cli.md.)";

int Main(int argc, char** argv) {
  CLI::App app("dlock: distributed locks from the shell", "dlock");
  app.footer(kExamples);
  app.require_subcommand(1);

  BackendFlags flags;
  RunFlags run;
  CLI::App* run_cmd = app.add_subcommand(
      "run",
      "Run a command while holding a lock, like flock(1) across machines");
  AddBackendFlags(*run_cmd, flags, /*json=*/false);
  run_cmd->add_option("--wait", run.wait,
                      "How long to wait for the lock: 0 (one try), forever, "
                      "or a duration (default: profile's, else forever)");
  run_cmd->add_option("--lease", run.lease,
                      "Lease renewed by the watchdog while the command runs; "
                      "if dlock dies the lock frees within it (default 30s)");
  run_cmd
      ->add_option("--on-lost-signal", run.on_lost_signal,
                   "Signal sent to the command if the lock is lost")
      ->capture_default_str();
  run_cmd
      ->add_option("--kill-after", run.kill_after,
                   "After a loss, SIGKILL the command if it is still "
                   "running this long after the signal")
      ->capture_default_str();
  run_cmd->add_option("--once-per", run.once_per,
                      "Scheduled job: run at most once per slot of this "
                      "period (1h, 15m, 1d), slots aligned on UTC");
  run_cmd->add_option("--slot", run.slot,
                      "Scheduled job: run at most once for this slot name");
  run_cmd->add_option("--at-least-for", run.at_least_for,
                      "Scheduled job: keep others out this long after the "
                      "start, however soon the command ends");
  run_cmd->add_option("--at-most-for", run.at_most_for,
                      "Scheduled job: stop a run that lasts longer, and let "
                      "others in (default with --once-per: the period)");
  run_cmd->add_flag("--quiet-skip", run.quiet_skip,
                    "Scheduled job: a skipped run prints nothing and exits 0");
  run_cmd->add_option("name", run.name, "Lock name")->required();
  run_cmd
      ->add_option("command", run.command,
                   "The command and its arguments, after --")
      ->required();
  run_cmd->footer(
      "\nExample:\n  dlock run --backend redis://127.0.0.1:6379 --wait 10s "
      "--lease 15s backup -- /usr/local/bin/backup.sh --full\n"
      "The command sees DLOCK_LOCK_NAME and DLOCK_FENCING_TOKEN.\n"
      "\nA scheduled job, once per hour across every machine whose cron "
      "starts it:\n  dlock run --once-per 1h --at-least-for 5m --quiet-skip "
      "hourly-report -- ./report.sh");

  std::string status_name;
  CLI::App* status_cmd = app.add_subcommand("status", "Show who holds a lock");
  AddBackendFlags(*status_cmd, flags, /*json=*/true);
  status_cmd->add_option("name", status_name, "Lock name")->required();
  status_cmd->footer("\nExample:\n  dlock status --json nightly-report");

  std::string prefix;
  CLI::App* list_cmd = app.add_subcommand(
      "list", "List the locks held (where the backend can list)");
  AddBackendFlags(*list_cmd, flags, /*json=*/true);
  list_cmd->add_option("--prefix", prefix, "Only names starting with this");
  list_cmd->footer("\nExample:\n  dlock list --prefix nightly-");

  std::string unlock_name;
  bool force = false;
  uint64_t unlock_token = 0;
  CLI::App* unlock_cmd = app.add_subcommand(
      "unlock", "Remove a lock whoever holds it (administrators)");
  AddBackendFlags(*unlock_cmd, flags, /*json=*/true);
  unlock_cmd->add_flag("--force", force, "Required: the holder loses the lock");
  unlock_cmd
      ->add_option(
          "--token", unlock_token,
          "Only if still held with this fencing token (as status showed it): "
          "never removes a holder that took the lock over since")
      ->check(CLI::Range(uint64_t{1}, std::numeric_limits<uint64_t>::max()));
  unlock_cmd->add_option("name", unlock_name, "Lock name")->required();
  unlock_cmd->footer(
      "\nExample:\n  dlock unlock --force nightly-report\n  dlock unlock "
      "--force --token 41 nightly-report");

  TopFlags top;
  CLI::App* top_cmd = app.add_subcommand(
      "top", "Live table of the locks held; n h l t sort, r reverses, q quits");
  AddBackendFlags(*top_cmd, flags, /*json=*/false);
  AddTopFlags(*top_cmd, top);
  top_cmd->footer(
      "\nExample:\n  dlock top --backend redis://127.0.0.1:6379 --prefix "
      "reports/\nWithout a terminal (or with --once) it prints one table.");

  MonitorFlags monitor;
  CLI::App* monitor_cmd = app.add_subcommand(
      "monitor",
      "Watch the locks as a service: held too long, dead holders, metrics");
  AddBackendFlags(*monitor_cmd, flags, /*json=*/false);
  AddMonitorFlags(*monitor_cmd, monitor);
  monitor_cmd->footer(
      "\nExample:\n  dlock monitor --backend redis://127.0.0.1:6379 "
      "--held-longer-than 15m --on-held-too-long /usr/local/bin/page.sh "
      "--metrics-listen 127.0.0.1:9464\nRuns until SIGINT or SIGTERM; one "
      "log line per event on stdout. See docs/cli.md.");

  BenchFlags bench;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench", "Measure backends side by side on your own servers");
  AddBenchFlags(*bench_cmd, bench);
  bench_cmd->footer(
      "\nExample:\n  dlock bench --backend redis://cache:6379 --backend "
      "zk://zk1:2181 --threads 1,16 --duration 5s\n"
      "Runs in namespace dlock-bench under names of its own, and releases "
      "what it took. See docs/cli.md.");

  std::string grant_to;
  CLI::App* setup_cmd = app.add_subcommand(
      "setup",
      "Create or migrate what dlock keeps on the server (PostgreSQL's lock "
      "tables), as a user allowed to");
  AddBackendFlags(*setup_cmd, flags, /*json=*/false);
  setup_cmd->add_option("--grant-to", grant_to,
                        "PostgreSQL: grant this role what dlock needs on them");
  setup_cmd->footer(
      "\nExample:\n  dlock setup --backend postgres://admin@db/app "
      "--grant-to app_user\nApplications then connect as app_user, which "
      "may not create tables. See docs/postgres.md.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    // Prints the help of the subcommand given, if any.
    std::fputs(app.help().c_str(), stdout);
    return kOk;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return kOk;
  } catch (const CLI::ParseError& e) {
    return Fail(kUsage, absl::StrCat(e.what(), " (see dlock --help)"));
  }

  if (run_cmd->parsed()) return RunCommand(flags, run);
  if (status_cmd->parsed()) return StatusCommand(flags, status_name);
  if (list_cmd->parsed()) return ListCommand(flags, prefix);
  if (unlock_cmd->parsed())
    return UnlockCommand(flags, unlock_name, force, unlock_token);
  if (bench_cmd->parsed()) return BenchCommand(bench);
  if (top_cmd->parsed()) return TopCommand(flags, top);
  if (monitor_cmd->parsed()) return MonitorCommand(flags, monitor);
  if (setup_cmd->parsed()) return SetupCommand(flags, grant_to);
  return Fail(kUsage,
              "give a command: run, status, list, unlock, top, monitor, "
              "bench or setup");
}

}  // namespace
}  // namespace dlock::cli

int main(int argc, char** argv) { return dlock::cli::Main(argc, argv); }
