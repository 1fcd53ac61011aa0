// What `dlock` says about itself: --version and `dlock version`, `dlock help
// [SUBCOMMAND]`, the manual page generated from the same definitions as
// --help, and the bash and zsh completions, checked against --help.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace dlock {
namespace {

using test::Dlock;
using test::Result;
using test::RunProcess;
using test::RunShell;
using ::testing::HasSubstr;

// The subcommands `dlock --help` lists, so that a new one is checked (its
// help, its man page section, its completion) without editing this test.
std::vector<std::string> Subcommands() {
  Result r = RunProcess(Dlock({"--help"}));
  EXPECT_EQ(r.code, 0) << r.err;
  std::vector<std::string> names;
  bool listing = false;
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    if (line == "Subcommands:") {
      listing = true;
    } else if (listing && absl::StartsWith(line, "  ")) {
      line = absl::StripLeadingAsciiWhitespace(line);
      names.emplace_back(line.substr(0, line.find(' ')));
    } else if (listing) {
      break;
    }
  }
  EXPECT_GE(names.size(), 9u) << r.out;
  return names;
}

// The long options `dlock SUBCOMMAND --help` lists ("--wait", "--help").
std::set<std::string> OptionsInHelp(const std::string& subcommand) {
  Result r = RunProcess(Dlock({subcommand, "--help"}));
  EXPECT_EQ(r.code, 0) << subcommand << ": " << r.err;
  std::set<std::string> options;
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, "-h,")) {
      options.insert("--help");
      continue;
    }
    if (!absl::StartsWith(line, "--")) continue;
    options.insert(std::string(line.substr(0, line.find_first_of(" \t"))));
  }
  return options;
}

std::set<std::string> Words(const std::string& text) {
  std::vector<std::string> words =
      absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  return std::set<std::string>(words.begin(), words.end());
}

TEST(CliHelpTest, VersionNamesTheCommitBackendsAndClientLibraries) {
  Result flag = RunProcess(Dlock({"--version"}));
  EXPECT_EQ(flag.code, 0) << flag.err;
  Result command = RunProcess(Dlock({"version"}));
  EXPECT_EQ(command.code, 0) << command.err;
  EXPECT_EQ(flag.out, command.out);
  const std::vector<std::string> lines =
      absl::StrSplit(flag.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << flag.out;
  EXPECT_TRUE(absl::StartsWith(
      lines[0], absl::StrCat("dlock ", DLOCK_VERSION, " (commit ")))
      << lines[0];
  EXPECT_FALSE(absl::StrContains(lines[0], "commit unknown")) << lines[0];
  EXPECT_TRUE(absl::StartsWith(lines[1], "backends: ")) << lines[1];
  for (const char* scheme : {"memory", "redis", "redlock", "zk", "postgres"}) {
    EXPECT_THAT(lines[1], HasSubstr(scheme));
  }
  EXPECT_TRUE(absl::StartsWith(lines[2], "client libraries: ")) << lines[2];
  for (const char* library :
       {"hiredis 0.", "OpenSSL 3.", "libpq 1", "ZooKeeper C client 3."}) {
    EXPECT_THAT(lines[2], HasSubstr(library));
  }
}

TEST(CliHelpTest, HelpSubcommandIsHelpFlag) {
  EXPECT_EQ(RunProcess(Dlock({"help"})).out, RunProcess(Dlock({"--help"})).out);
  for (const std::string& subcommand : Subcommands()) {
    Result help = RunProcess(Dlock({"help", subcommand}));
    EXPECT_EQ(help.code, 0) << subcommand;
    EXPECT_EQ(help.out, RunProcess(Dlock({subcommand, "--help"})).out)
        << subcommand;
  }
  Result none = RunProcess(Dlock({"help", "frobnicate"}));
  EXPECT_EQ(none.code, 64);
  test::ExpectOneLine(none);
  // The default wait is stated.
  EXPECT_THAT(RunProcess(Dlock({"help", "run"})).out,
              HasSubstr("(default: forever, or the profile's default_wait)"));
}

// dlock(1) is generated from the definitions --help prints: every
// subcommand, every option, every example; man renders it without a warning.
TEST(CliHelpTest, TheManPageHasWhatHelpHas) {
  Result man = RunProcess(Dlock({"help", "--man"}));
  EXPECT_EQ(man.code, 0) << man.err;
  EXPECT_TRUE(absl::StartsWith(man.out, ".TH DLOCK 1 ")) << man.out;
  // What the build installs is the same text.
  EXPECT_EQ(test::ReadFileOrEmpty(DLOCK_MAN_PAGE_PATH), man.out);
  Result rendered = RunShell(absl::StrCat("groff -man -Tascii -P-cbou -ww '",
                                          DLOCK_MAN_PAGE_PATH, "'"));
  EXPECT_EQ(rendered.code, 0) << rendered.err;
  EXPECT_EQ(rendered.err, "");
  for (const std::string& subcommand : Subcommands()) {
    EXPECT_THAT(man.out,
                HasSubstr(absl::StrCat(".SS \"dlock ", subcommand, "\"\n")));
    for (const std::string& option : OptionsInHelp(subcommand)) {
      // Roff's minus, so that a copied option is ASCII.
      EXPECT_THAT(man.out,
                  HasSubstr(absl::StrCat(
                      ".B ", absl::StrReplaceAll(option, {{"-", "\\-"}}))))
          << subcommand << " " << option;
      EXPECT_THAT(rendered.out, HasSubstr(absl::StrCat("       ", option)))
          << subcommand << " " << option;
    }
  }
  EXPECT_THAT(rendered.out, HasSubstr("Exit codes: 0 success"));
  EXPECT_THAT(rendered.out,
              HasSubstr("dlock run --once-per 1h --at-least-for 5m "
                        "--quiet-skip hourly-report -- ./report.sh"));
}

// `dlock <TAB>` and `dlock SUB --<TAB>` in bash, through the installed
// script's function.
std::set<std::string> BashCompletes(const std::vector<std::string>& words,
                                    const std::string& current = "") {
  const std::string script = absl::StrCat(
      "source '", test::kSourceDir,
      "/adapters/cli/completion/dlock.bash'\nCOMP_WORDS=(",
      absl::StrJoin(words, " "), " '", current, "')\nCOMP_CWORD=", words.size(),
      "\n_dlock\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n");
  Result r = RunShell(script);
  EXPECT_EQ(r.code, 0) << r.err;
  return Words(r.out);
}

// The same in zsh: the file is the body of _dlock (as compinit autoloads
// it); compadd, which only exists inside a completion widget, prints.
std::set<std::string> ZshCompletes(const std::vector<std::string>& words,
                                   const std::string& current = "") {
  const std::string script = absl::StrCat(
      "compadd() { [[ $1 == -- ]] && shift; print -l -- \"$@\"; }\n"
      "_files() { :; }\n_normal() { :; }\n"
      "eval \"_dlock() { $(<'",
      test::kSourceDir,
      "/adapters/cli/completion/_dlock') }\"\n"
      "words=(",
      absl::StrJoin(words, " "), " '", current,
      "')\nCURRENT=", words.size() + 1, "\n_dlock\n");
  Result r = RunProcess({"/usr/bin/zsh", "-f", "-c", script});
  EXPECT_EQ(r.code, 0) << r.err;
  return Words(r.out);
}

TEST(CliHelpTest, BashAndZshCompleteSubcommandsAndEveryFlag) {
  const std::vector<std::string> subcommands = Subcommands();
  std::set<std::string> top(subcommands.begin(), subcommands.end());
  top.insert({"--help", "--version"});
  EXPECT_EQ(BashCompletes({"dlock"}), top);
  EXPECT_EQ(ZshCompletes({"dlock"}), top);
  for (const std::string& subcommand : subcommands) {
    if (subcommand == "help") continue;  // completes subcommands, below
    const std::set<std::string> options = OptionsInHelp(subcommand);
    EXPECT_EQ(BashCompletes({"dlock", subcommand}, "--"), options)
        << subcommand;
    EXPECT_EQ(ZshCompletes({"dlock", subcommand}, "--"), options) << subcommand;
  }
  std::set<std::string> help(subcommands.begin(), subcommands.end());
  help.insert({"--man", "--help"});
  EXPECT_EQ(BashCompletes({"dlock", "help"}), help);
  EXPECT_EQ(ZshCompletes({"dlock", "help"}), help);
  EXPECT_EQ(BashCompletes({"dlock", "run", "--on-lost-signal"}),
            Words("TERM INT HUP QUIT KILL USR1 USR2"));
}

}  // namespace
}  // namespace dlock
