#include "app_text.h"

#include <algorithm>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "dlock/backend/backend.h"
#include "dlock_commit.h"  // generated at build time: DLOCK_COMMIT

#ifndef DLOCK_VERSION
#define DLOCK_VERSION "unknown"
#endif

namespace dlock::cli {
namespace {

// Text as roff reads it: a backslash as \e, '-' as the ASCII minus \- (so
// that a copied option works), and a line that would start with '.' or
// '\'' (a request) shielded with \&.
std::string Roff(absl::string_view text) {
  std::string escaped =
      absl::StrReplaceAll(text, {{"\\", "\\e"}, {"-", "\\-"}});
  std::vector<std::string> lines = absl::StrSplit(escaped, '\n');
  for (std::string& line : lines) {
    if (!line.empty() && (line[0] == '.' || line[0] == '\'')) {
      line.insert(0, "\\&");
    }
  }
  return absl::StrJoin(lines, "\n");
}

// A footer ("Example:\n  dlock run ...") as a block kept as written.
std::string FooterBlock(absl::string_view footer) {
  const absl::string_view trimmed = absl::StripAsciiWhitespace(footer);
  if (trimmed.empty()) return "";
  return absl::StrCat(".PP\n.nf\n", Roff(trimmed), "\n.fi\n");
}

std::string OptionsBlock(const CLI::App& command) {
  std::string out;
  for (const CLI::Option* option : command.get_options()) {
    if (option->get_lnames().empty()) continue;  // positionals: the usage
    const bool takes_value = option->get_type_size_max() > 0;
    absl::StrAppend(&out, ".TP\n.B ", Roff(option->get_name()),
                    takes_value
                        ? absl::StrCat(" \\fI", option->get_type_name(), "\\fR")
                        : "",
                    "\n", Roff(option->get_description()));
    if (!option->get_default_str().empty()) {
      absl::StrAppend(&out, " (default: ", Roff(option->get_default_str()),
                      ")");
    }
    out.push_back('\n');
  }
  return out;
}

}  // namespace

std::string VersionText() {
  std::vector<std::string> schemes = RegisteredSchemes();
  std::sort(schemes.begin(), schemes.end());
  const std::vector<std::string> libraries = ClientLibraryVersions();
  return absl::StrCat(
      "dlock ", DLOCK_VERSION, " (commit ", DLOCK_COMMIT, ")\n",
      "backends: ", absl::StrJoin(schemes, ", "), "\n", "client libraries: ",
      libraries.empty() ? "none" : absl::StrJoin(libraries, ", "), "\n");
}

std::string ManPage(const CLI::App& app) {
  std::string out = absl::StrCat(
      ".TH DLOCK 1 \"\" \"dlock ", DLOCK_VERSION,
      "\" \"User Commands\"\n.nh\n.ad l\n.SH NAME\ndlock \\- ",
      Roff(app.get_description()),
      "\n.SH SYNOPSIS\n.B dlock\n\\fISUBCOMMAND\\fR [\\fIOPTIONS\\fR] "
      "[\\fIARGS\\fR]\n.SH DESCRIPTION\n",
      FooterBlock(app.get_footer()), ".SH OPTIONS\n", OptionsBlock(app),
      ".SH SUBCOMMANDS\n");
  for (const CLI::App* command : app.get_subcommands({})) {
    absl::StrAppend(&out, ".SS \"dlock ", command->get_name(), "\"\n",
                    Roff(command->get_description()),
                    "\n.PP\n.nf\nUsage: dlock ", command->get_name(),
                    " [OPTIONS]");
    for (const CLI::Option* positional : command->get_options(
             [](const CLI::Option* o) { return o->get_positional(); })) {
      absl::StrAppend(&out, " ", positional->get_name(),
                      positional->get_required() ? "" : "?",
                      positional->get_items_expected_max() > 1 ? "..." : "");
    }
    absl::StrAppend(&out, "\n.fi\n", OptionsBlock(*command),
                    FooterBlock(command->get_footer()));
  }
  absl::StrAppend(&out,
                  ".SH SEE ALSO\n\\fBdlock help\\fR \\fISUBCOMMAND\\fR; "
                  "docs/cli.md in dlock's source.\n");
  return out;
}

std::string DoubleDashHint(const CLI::App& run,
                           const std::vector<std::string>& args,
                           const std::vector<std::string>& unexpected) {
  const std::string quoted =
      absl::StrCat("'", absl::StrJoin(unexpected, " "), "'");
  std::string message = absl::StrCat(
      quoted, unexpected.size() == 1 ? " is not an option" : " are not options",
      " of dlock run; if the command takes ",
      unexpected.size() == 1 ? "it" : "them", ", put -- before the command");
  // The name is the first argument that is neither an option nor the value
  // of one; the command follows it.
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return message;
    if (arg.size() > 1 && arg[0] == '-') {
      const CLI::Option* option =
          run.get_option_no_throw(arg.substr(0, arg.find('=')));
      if (option != nullptr && option->get_type_size_max() > 0 &&
          arg.find('=') == std::string::npos) {
        ++i;  // its value
      }
      continue;
    }
    std::vector<std::string> fixed(args.begin(), args.begin() + i + 1);
    fixed.push_back("--");
    fixed.insert(fixed.end(), args.begin() + i + 1, args.end());
    return absl::StrCat(message, ": dlock run ", absl::StrJoin(fixed, " "));
  }
  return message;
}

}  // namespace dlock::cli
