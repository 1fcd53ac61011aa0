// Copyright dlock authors. What `dlock` says about itself, from the same
// CLI11 definitions that parse its flags: the version, the manual page, and
// the hint for a command whose flags were read as dlock's.
#ifndef DLOCK_ADAPTERS_CLI_APP_TEXT_H_
#define DLOCK_ADAPTERS_CLI_APP_TEXT_H_

#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace dlock::cli {

// `dlock --version`: the version and commit, the backends this build has
// and the client libraries they talk through, one fact per line.
std::string VersionText();

// The manual page, dlock(1), in roff: the top-level description and footer,
// then every subcommand with its --help text (description, usage, options,
// footer). Installed by `cmake --install`; `dlock help --man` prints it.
std::string ManPage(const CLI::App& app);

// For `dlock run NAME CMD -FLAG` (no "--"): the message that says to put --
// before the command, with the corrected command line when it can tell
// where the command starts. `args` are run's arguments after "run";
// `unexpected` the ones CLI11 did not take.
std::string DoubleDashHint(const CLI::App& run,
                           const std::vector<std::string>& args,
                           const std::vector<std::string>& unexpected);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_APP_TEXT_H_
