// The examples in docs/cli.md and docs/adapters.md are run: every ```sh
// block is executed with bash -euo pipefail against a throwaway Redis, every
// ```toml block is parsed, and every ```cpp block of adapters.md must appear
// in docs_examples_test.cc, which runs it.
#include <atomic>
#include <string>
#include <vector>

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
#include "test_util.h"

namespace dlock {
namespace {

std::string Doc(const std::string& name) {
  const std::string path = absl::StrCat(testing::kSourceDir, "/docs/", name);
  std::string text = testing::ReadFileOrEmpty(path);
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
    absl::StatusOr<std::unique_ptr<testing::RedisServer>> server =
        testing::RedisServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
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
        std::string(testing::kCliPath)
            .substr(0, std::string(testing::kCliPath).rfind('/'));
    const std::string bin_dir = cli_dir.substr(0, cli_dir.rfind("/adapters/"));
    static std::atomic<int> n{0};
    for (const std::string& block : blocks) {
      const std::string uri = redis_->Uri(absl::StrCat("docs", n++));
      const std::string script =
          absl::StrReplaceAll(block, {{"redis://127.0.0.1:6379", uri}});
      absl::StatusOr<std::string> dir = testing::MakeTempDir("dlock-docs");
      ASSERT_TRUE(dir.ok());
      testing::Result r = testing::RunShell(
          absl::StrCat("cd ", *dir, "\n", script),
          {absl::StrCat("PATH=", cli_dir, ":", bin_dir,
                        "/examples:", std::getenv("PATH")),
           "DLOCK_BACKEND=", "DLOCK_CONFIG=", "DLOCK_PROFILE="});
      EXPECT_EQ(r.code, 0) << doc << " block failed:\n"
                           << block << "\nstdout:\n"
                           << r.out << "\nstderr:\n"
                           << r.err;
      testing::RemoveTree(*dir);
    }
  }

  static testing::RedisServer* redis_;
};
testing::RedisServer* DocsTest::redis_ = nullptr;

TEST_F(DocsTest, CliShellExamplesRunAsWritten) { RunShellBlocks("cli.md"); }

TEST_F(DocsTest, AdapterShellExamplesRunAsWritten) {
  RunShellBlocks("adapters.md");
}

TEST(DocsSnippetsTest, TomlExamplesParse) {
  for (const char* doc : {"cli.md", "adapters.md"}) {
    const std::vector<std::string> blocks = Blocks(Doc(doc), "toml");
    ASSERT_FALSE(blocks.empty()) << doc;
    for (const std::string& block : blocks) {
      absl::StatusOr<Config> config = ParseConfig(block, doc);
      EXPECT_TRUE(config.ok()) << config.status() << "\n" << block;
    }
  }
}

TEST(DocsSnippetsTest, TheDockerProfilesLoad) {
  absl::StatusOr<Config> config =
      LoadConfig(absl::StrCat(testing::kSourceDir, "/docker/dlock.toml"));
  ASSERT_TRUE(config.ok()) << config.status();
  for (const char* name : {"redis", "zookeeper", "postgres"}) {
    EXPECT_TRUE(config->Find(name).ok()) << name;
  }
}

TEST(DocsSnippetsTest, CppExamplesAreTheTestedOnes) {
  const std::string tested = Normalized(testing::ReadFileOrEmpty(absl::StrCat(
      testing::kSourceDir, "/adapters/tests/docs_examples_test.cc")));
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

}  // namespace
}  // namespace dlock
