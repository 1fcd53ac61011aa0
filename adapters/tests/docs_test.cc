// The examples in docs/cli.md, docs/adapters.md and
// docs/operations.md are run: every ```sh
// block is executed with bash -euo pipefail against a throwaway Redis, every
// ```toml block is parsed, and every ```cpp block of adapters.md must appear
// in docs_examples_test.cc, which runs it. Every contract clause ("(C7)",
// "C19", a test named C21_...) cited anywhere in the tree has its section in
// docs/contract.md, and the conformance tests that page names exist.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "dlock/adapters/config.h"
#include "gtest/gtest.h"
#include "redis_server.h"
#include "server_process.h"
#include "status_testing.h"
#include "test_util.h"

namespace dlock {
namespace {

std::string Doc(const std::string& name) {
  const std::string path = absl::StrCat(test::kSourceDir, "/docs/", name);
  std::string text = test::ReadFileOrEmpty(path);
  EXPECT_FALSE(text.empty()) << "cannot read " << path;
  return text;
}

// The fenced blocks of `markdown` whose info string is `language`.
std::vector<std::string> Blocks(const std::string& markdown,
                                const std::string& language) {
  std::vector<std::string> blocks;
  std::string* current = nullptr;
  for (absl::string_view line : absl::StrSplit(markdown, '\n')) {
    if (current == nullptr) {
      if (line == absl::StrCat("```", language)) {
        blocks.emplace_back();
        current = &blocks.back();
      }
    } else if (line == "```") {
      current = nullptr;
    } else {
      absl::StrAppend(current, line, "\n");
    }
  }
  return blocks;
}

// Lines without their indentation, so a snippet matches however deep the
// test nests it.
std::string Normalized(const std::string& code) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(code, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty()) lines.emplace_back(line);
  }
  return absl::StrJoin(lines, "\n");
}

class DocsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<test::RedisServer>> server =
        test::RedisServer::Start();
    ASSERT_OK(server);
    redis_ = server->release();
  }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }

  // Runs each shell block of `doc` in a fresh directory and namespace.
  void RunShellBlocks(const std::string& doc) {
    const std::vector<std::string> blocks = Blocks(Doc(doc), "sh");
    ASSERT_FALSE(blocks.empty());
    const std::string cli_dir =
        std::string(test::kCliPath)
            .substr(0, std::string(test::kCliPath).rfind('/'));
    const std::string bin_dir = cli_dir.substr(0, cli_dir.rfind("/adapters/"));
    static std::atomic<int> n{0};
    for (const std::string& block : blocks) {
      const std::string uri = redis_->Uri(absl::StrCat("docs", n++));
      // The server's URI has a query already: a URI of the page with its
      // own options ("...6379?liveness_ttl=2s") adds them to it.
      const std::string script = absl::StrReplaceAll(
          absl::StrReplaceAll(
              block,
              {{"redis://127.0.0.1:6379?",
                absl::StrCat(uri, absl::StrContains(uri, '?') ? "&" : "?")}}),
          {{"redis://127.0.0.1:6379", uri}});
      absl::StatusOr<std::string> dir = test::MakeTempDir("dlock-docs");
      ASSERT_OK(dir);
      test::Result r =
          test::RunShell(absl::StrCat("cd ", *dir, "\n", script),
                         {absl::StrCat("PATH=", cli_dir, ":", bin_dir,
                                       "/examples:", std::getenv("PATH")),
                          "DLOCK_BACKEND=", "DLOCK_CONFIG=", "DLOCK_PROFILE="});
      EXPECT_EQ(r.code, 0) << doc << " block failed:\n"
                           << block << "\nstdout:\n"
                           << r.out << "\nstderr:\n"
                           << r.err;
      test::RemoveTree(*dir);
    }
  }

  static test::RedisServer* redis_;
};
test::RedisServer* DocsTest::redis_ = nullptr;

TEST_F(DocsTest, CliShellExamplesRunAsWritten) { RunShellBlocks("cli.md"); }

// The crontab example of docs/cli.md, run as cron would run it on three
// machines whose timers fire together (/bin/sh, the crontab's environment),
// with the backend replaced by the test's and the job's script by one that
// logs its run; then the systemd unit's ExecStart on a fourth machine.
TEST_F(DocsTest, CrontabAndTimerExamplesRunOncePerSlot) {
  const std::vector<std::string> crontabs = Blocks(Doc("cli.md"), "crontab");
  ASSERT_EQ(crontabs.size(), 1u);
  absl::StatusOr<std::string> dir = test::MakeTempDir("dlock-cron");
  ASSERT_OK(dir);
  const std::string script = *dir + "/job.sh";
  test::WriteFile(script,
                  absl::StrCat("#!/bin/sh\necho ran >> ", *dir, "/runs.log\n"));
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  const std::string uri = redis_->Uri("docs-cron");
  auto as_tested = [&](absl::string_view text) {
    return absl::StrReplaceAll(text,
                               {{"redis://127.0.0.1:6379", uri},
                                {"/usr/local/bin/hourly-report.sh", script},
                                {"/usr/local/bin/dlock", test::kCliPath}});
  };
  const std::string cli_path = test::kCliPath;
  std::vector<std::string> env = {
      absl::StrCat("PATH=", cli_path.substr(0, cli_path.rfind('/')),
                   ":/usr/bin:/bin"),
      "DLOCK_CONFIG=", "DLOCK_PROFILE="};
  std::string command;
  for (absl::string_view line : absl::StrSplit(crontabs[0], '\n')) {
    if (line.empty()) continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::MaxSplits(' ', 5));
    if (fields.size() == 1) {
      env.push_back(as_tested(line));  // NAME=value
      continue;
    }
    ASSERT_EQ(fields.size(), 6u) << line;
    ASSERT_TRUE(command.empty()) << "one job line expected";
    command = as_tested(fields[5]);
  }
  ASSERT_FALSE(command.empty());
  // The line runs once an hour: keep the three runs inside one hour.
  const absl::Duration into_hour = absl::Now() - absl::FromUnixSeconds(0);
  const absl::Duration left = absl::Hours(1) - into_hour % absl::Hours(1);
  if (left < absl::Seconds(5)) absl::SleepFor(left + absl::Seconds(1));

  std::vector<std::unique_ptr<test::Process>> machines;
  for (int i = 0; i < 3; ++i) {
    machines.push_back(std::make_unique<test::Process>(
        std::vector<std::string>{"/bin/sh", "-c", command}, env));
  }
  for (auto& machine : machines) {
    // Quiet: cron mails any output, and nobody wants mail for a skip.
    EXPECT_EQ(machine->Wait(absl::Seconds(30)), 0) << machine->err();
    EXPECT_EQ(machine->out(), "");
    EXPECT_EQ(machine->err(), "");
  }
  EXPECT_EQ(test::ReadFileOrEmpty(*dir + "/runs.log"), "ran\n");

  // The timer's service on a fourth machine, later in the hour: a skip, with
  // an exit status the unit counts as success.
  const std::vector<std::string> units = Blocks(Doc("cli.md"), "ini");
  ASSERT_EQ(units.size(), 2u);
  std::string exec_start, success;
  for (absl::string_view line : absl::StrSplit(units[0], '\n')) {
    if (absl::ConsumePrefix(&line, "ExecStart=")) exec_start = as_tested(line);
    if (absl::ConsumePrefix(&line, "SuccessExitStatus=")) {
      success = std::string(line);
    }
    if (absl::ConsumePrefix(&line, "Environment="))
      env.push_back(as_tested(line));
  }
  ASSERT_FALSE(exec_start.empty());
  test::Process service({"/bin/sh", "-c", exec_start}, env);
  const int code = service.Wait(absl::Seconds(30));
  EXPECT_EQ(code, 79) << service.err();
  const std::vector<std::string> ok_codes = absl::StrSplit(success, ' ');
  EXPECT_NE(std::find(ok_codes.begin(), ok_codes.end(), absl::StrCat(code)),
            ok_codes.end())
      << "SuccessExitStatus=" << success;
  EXPECT_EQ(test::ReadFileOrEmpty(*dir + "/runs.log"), "ran\n");
  test::RemoveTree(*dir);
}

TEST_F(DocsTest, OperationsShellExamplesRunAsWritten) {
  RunShellBlocks("operations.md");
}

TEST_F(DocsTest, AdapterShellExamplesRunAsWritten) {
  RunShellBlocks("adapters.md");
}

TEST(DocsSnippetsTest, TomlExamplesParse) {
  for (const char* doc : {"cli.md", "adapters.md"}) {
    const std::vector<std::string> blocks = Blocks(Doc(doc), "toml");
    ASSERT_FALSE(blocks.empty()) << doc;
    for (const std::string& block : blocks) {
      absl::StatusOr<Config> config = ParseConfig(block, doc);
      EXPECT_OK(config) << "\n" << block;
    }
  }
}

TEST(DocsSnippetsTest, TheDockerProfilesLoad) {
  absl::StatusOr<Config> config =
      LoadConfig(absl::StrCat(test::kSourceDir, "/docker/dlock.toml"));
  ASSERT_OK(config);
  for (const char* name : {"redis", "zookeeper", "postgres"}) {
    EXPECT_OK(config->Find(name)) << name;
  }
}

TEST(DocsSnippetsTest, CppExamplesAreTheTestedOnes) {
  const std::string tested = Normalized(test::ReadFileOrEmpty(
      absl::StrCat(test::kSourceDir, "/adapters/tests/docs_examples_test.cc")));
  ASSERT_FALSE(tested.empty());
  const std::vector<std::string> blocks = Blocks(Doc("adapters.md"), "cpp");
  EXPECT_GE(blocks.size(), 5u);
  for (const std::string& block : blocks) {
    EXPECT_TRUE(absl::StrContains(tested, Normalized(block)))
        << "docs/adapters.md has code that docs_examples_test.cc does not "
           "run:\n"
        << block;
  }
}

// README.md's first example is examples/readme_example.cc, which
// docs_examples_test.cc builds and runs.
TEST(DocsSnippetsTest, ReadmeCppExampleIsTheTestedProgram) {
  const std::string readme =
      test::ReadFileOrEmpty(absl::StrCat(test::kSourceDir, "/README.md"));
  const std::vector<std::string> blocks = Blocks(readme, "cpp");
  ASSERT_FALSE(blocks.empty());
  const std::string program = test::ReadFileOrEmpty(
      absl::StrCat(test::kSourceDir, "/examples/readme_example.cc"));
  EXPECT_TRUE(absl::EndsWith(program, blocks[0]))
      << "README.md's first example differs from "
         "examples/readme_example.cc:\n"
      << blocks[0];
  // The short path: no handle, and the mutex as a value.
  EXPECT_TRUE(absl::StrContains(blocks[0], "locks.Acquire(")) << blocks[0];
  EXPECT_TRUE(absl::StrContains(blocks[0], "dlock::DistributedMutex mutex("))
      << blocks[0];
  EXPECT_FALSE(absl::StrContains(blocks[0], "GetLock(")) << blocks[0];
}

// The GitHub anchors of `markdown`'s headings: lower case, spaces as '-',
// punctuation but '-' and '_' dropped.
std::set<std::string> Anchors(const std::string& markdown) {
  std::set<std::string> anchors;
  for (absl::string_view line : absl::StrSplit(markdown, '\n')) {
    if (!absl::StartsWith(line, "#")) continue;
    line = absl::StripLeadingAsciiWhitespace(line.substr(line.find(' ')));
    std::string anchor;
    for (char c : line) {
      if (absl::ascii_isalnum(c) || c == '-' || c == '_') {
        anchor.push_back(absl::ascii_tolower(c));
      } else if (c == ' ') {
        anchor.push_back('-');
      }
    }
    anchors.insert(anchor);
  }
  return anchors;
}

// Every figure of docs/choosing.md ("44,129", "0.29%", "1.94 s", "43 µs") is
// one that benchmarks.md or reliability.md reports, every row links to the
// one it comes from, and every link lands on a heading that exists.
TEST(ChoosingDocTest, EveryFigureIsBackedAndEveryLinkResolves) {
  const std::string choosing = Doc("choosing.md");
  const std::string backing =
      absl::StrCat(Doc("benchmarks.md"), Doc("reliability.md"));
  int rows = 0;
  for (absl::string_view line : absl::StrSplit(choosing, '\n')) {
    if (!absl::StartsWith(line, "| ") || absl::StartsWith(line, "| if you") ||
        absl::StartsWith(line, "| ---")) {
      continue;
    }
    ++rows;
    EXPECT_TRUE(absl::StrContains(line, "(benchmarks.md#") ||
                absl::StrContains(line, "(reliability.md#") ||
                absl::StrContains(line, "(backends.md)"))
        << "a row without the page its figures come from: " << line;
    // A figure: digits with a ',' or '.' inside, or a number and a unit.
    for (size_t i = 0; i < line.size(); ++i) {
      if (!absl::ascii_isdigit(line[i]) ||
          (i > 0 && (absl::ascii_isalnum(line[i - 1]) || line[i - 1] == '.' ||
                     line[i - 1] == ','))) {
        continue;
      }
      size_t end = i;
      while (end < line.size() &&
             (absl::ascii_isdigit(line[end]) ||
              ((line[end] == ',' || line[end] == '.') &&
               end + 1 < line.size() && absl::ascii_isdigit(line[end + 1])))) {
        ++end;
      }
      const absl::string_view number = line.substr(i, end - i);
      const absl::string_view after = line.substr(end);
      std::string figure(number);
      for (absl::string_view unit : {"%", " µs", " s", "×"}) {
        if (absl::StartsWith(after, unit)) figure = absl::StrCat(number, unit);
      }
      const bool is_figure = figure.size() > number.size() ||
                             absl::StrContains(number, ',') ||
                             absl::StrContains(number, '.');
      if (is_figure) {
        EXPECT_TRUE(absl::StrContains(backing, figure))
            << "docs/choosing.md quotes " << figure
            << ", which neither benchmarks.md nor reliability.md reports:\n"
            << line;
      }
      i = end;
    }
  }
  EXPECT_GE(rows, 8);
  // Links: to a page of docs/, and to one of its headings.
  for (size_t at = choosing.find("]("); at != std::string::npos;
       at = choosing.find("](", at + 2)) {
    const size_t end = choosing.find(')', at);
    const std::string target = choosing.substr(at + 2, end - at - 2);
    const std::vector<std::string> parts = absl::StrSplit(target, '#');
    const std::string page = Doc(parts[0]);
    ASSERT_FALSE(page.empty()) << target;
    if (parts.size() > 1) {
      EXPECT_TRUE(Anchors(page).contains(parts[1]))
          << "docs/choosing.md links to " << target
          << ", a heading that page does not have";
    }
  }
}

// A newcomer's first question, which backend, is answered before anything
// else the README links to.
TEST(ChoosingDocTest, TheReadmePointsAtItFirst) {
  const std::string readme =
      test::ReadFileOrEmpty(absl::StrCat(test::kSourceDir, "/README.md"));
  const size_t first_doc = readme.find("(docs/");
  ASSERT_NE(first_doc, std::string::npos);
  EXPECT_TRUE(absl::StartsWith(readme.substr(first_doc), "(docs/choosing.md)"))
      << readme.substr(first_doc, 40);
}

// operations.md no longer says what was true before holder liveness.
TEST(ChoosingDocTest, NoStaleStatements) {
  const std::string operations = Doc("operations.md");
  EXPECT_FALSE(absl::StrContains(operations, "LIVE shows `?` here"));
  EXPECT_FALSE(absl::StrContains(operations, "does not yet fill in"));
}

// A clause id cited in `text`: "C" and a number, not inside a longer word
// ("\xC1", "0xC0"), followed by anything but a letter or digit (an '_'
// starts a conformance test's name: C5_ReentryNeverShortensLease). Unicode's
// C0 control and C1 control characters are not clauses.
struct Citation {
  int clause;
  std::string word;  // the id and, for a test name, the rest of the name
  int line;
};
std::vector<Citation> Citations(absl::string_view text) {
  auto word_char = [](char c) { return absl::ascii_isalnum(c) || c == '_'; };
  std::vector<Citation> found;
  int line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') ++line;
    if (text[i] != 'C' || (i > 0 && word_char(text[i - 1]))) continue;
    size_t end = i + 1;
    while (end < text.size() && absl::ascii_isdigit(text[end])) ++end;
    if (end == i + 1 || end - i > 4) continue;
    if (end < text.size() && absl::ascii_isalpha(text[end])) continue;
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(text.substr(end)),
                         "control")) {
      continue;
    }
    size_t word_end = end;
    while (word_end < text.size() && word_char(text[word_end])) ++word_end;
    found.push_back({std::stoi(std::string(text.substr(i + 1, end - i - 1))),
                     std::string(text.substr(i, word_end - i)), line});
  }
  return found;
}

// The clauses docs/contract.md has a section for ("## C7. Renewal ..."),
// each with the text of its section.
std::map<int, std::string> ContractSections() {
  std::map<int, std::string> sections;
  std::string* current = nullptr;
  for (absl::string_view line : absl::StrSplit(Doc("contract.md"), '\n')) {
    if (absl::StartsWith(line, "#")) {
      current = nullptr;
      const std::vector<Citation> ids = Citations(line);
      if (absl::StartsWith(line, "## ") && !ids.empty() &&
          absl::StartsWith(line.substr(3), ids[0].word)) {
        EXPECT_EQ(sections.count(ids[0].clause), 0u) << line;
        current = &sections[ids[0].clause];
      }
    } else if (current != nullptr) {
      absl::StrAppend(current, line, "\n");
    }
  }
  return sections;
}

TEST(ContractDocTest, HasOneSectionPerClauseInOrder) {
  const std::map<int, std::string> sections = ContractSections();
  ASSERT_FALSE(sections.empty()) << "docs/contract.md has no ## C<n> heading";
  EXPECT_EQ(sections.begin()->first, 1);
  EXPECT_EQ(sections.rbegin()->first, static_cast<int>(sections.size()))
      << "a clause between C1 and the last has no section";
  EXPECT_GE(sections.size(), 21u);
}

TEST(ContractDocTest, EveryClauseCitedInTheTreeHasASection) {
  namespace fs = std::filesystem;
  const std::map<int, std::string> sections = ContractSections();
  ASSERT_FALSE(sections.empty());
  const fs::path root(test::kSourceDir);
  std::vector<fs::path> files = {root / "README.md", root / "CMakeLists.txt"};
  for (const char* top :
       {".ci", "adapters", "backends", "cmake", "core", "docker", "docs",
        "examples", "integration", "scripts", "tests"}) {
    if (!fs::exists(root / top)) continue;
    for (auto it = fs::recursive_directory_iterator(root / top);
         it != fs::recursive_directory_iterator(); ++it) {
      if (it->is_directory() &&
          absl::StartsWith(it->path().filename().string(), "build")) {
        it.disable_recursion_pending();  // a build tree inside the source
      } else if (it->is_regular_file()) {
        files.push_back(it->path());
      }
    }
  }
  const std::set<std::string> extensions = {
      ".cc", ".h", ".md", ".txt", ".cmake", ".in", ".sh", ".py", ".toml", ""};
  size_t cited = 0;
  for (const fs::path& file : files) {
    if (extensions.count(file.extension().string()) == 0) continue;
    for (const Citation& c : Citations(test::ReadFileOrEmpty(file.string()))) {
      ++cited;
      EXPECT_EQ(sections.count(c.clause), 1u)
          << fs::relative(file, root).string() << ":" << c.line << " cites "
          << c.word << ", which has no section in docs/contract.md";
    }
  }
  EXPECT_GT(cited, 100u) << "the scan found almost no citations";
}

TEST(ContractDocTest, NamedConformanceTestsExistUnderTheirClause) {
  namespace fs = std::filesystem;
  std::set<std::string> tests;
  for (const fs::directory_entry& file : fs::directory_iterator(
           fs::path(test::kSourceDir) / "tests" / "conformance")) {
    if (file.path().extension() != ".cc") continue;
    for (const Citation& c :
         Citations(test::ReadFileOrEmpty(file.path().string()))) {
      if (absl::StrContains(c.word, '_')) tests.insert(c.word);
    }
  }
  ASSERT_FALSE(tests.empty());
  for (const auto& [clause, section] : ContractSections()) {
    // A clause specified before the suite checks it names the cases it
    // plans: none may exist while the mark stands, so the first case that
    // lands takes the mark off, and from then on every case named must be.
    const bool specified_only =
        absl::StrContains(section, "\nStatus: specified.\n");
    int named = 0;
    for (const Citation& c : Citations(section)) {
      if (!absl::StrContains(c.word, '_')) continue;
      ++named;
      if (specified_only) {
        EXPECT_EQ(tests.count(c.word), 0u)
            << c.word << " is a test in tests/conformance/ now: take the "
            << "\"Status: specified.\" mark off C" << clause
            << " in docs/contract.md";
      } else {
        EXPECT_EQ(tests.count(c.word), 1u)
            << "docs/contract.md names " << c.word
            << ", which is not a test in tests/conformance/";
      }
      EXPECT_EQ(c.clause, clause)
          << c.word << " is named in the section of C" << clause;
    }
    EXPECT_GT(named, 0) << "the section of C" << clause
                        << " names no conformance test";
  }
}

}  // namespace
}  // namespace dlock
