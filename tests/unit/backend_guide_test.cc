// Copyright dlock authors. docs/writing-a-backend.md is the one page a new
// backend is written from: every path it names must exist, and every name in
// `code` that looks like an API must be declared in the headers a backend
// sees (core/include, integration/, the build helpers, the conformance
// suite's). A rename that leaves the page behind fails here.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The spans between backticks, outside fenced blocks.
std::vector<std::string> CodeSpans(const std::string& markdown) {
  std::vector<std::string> spans;
  bool fenced = false;
  for (absl::string_view line : absl::StrSplit(markdown, '\n')) {
    if (absl::StartsWith(line, "```")) {
      fenced = !fenced;
      continue;
    }
    if (fenced) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, '`');
    for (size_t i = 1; i < parts.size(); i += 2) {
      spans.emplace_back(parts[i]);
    }
  }
  return spans;
}

// What a backend author reads: the public headers, the test harness, the
// build helpers and the conformance suite.
std::string Declarations(const fs::path& root) {
  std::string all;
  for (const char* dir :
       {"core/include", "integration", "cmake", "tests/conformance"}) {
    for (const fs::directory_entry& entry :
         fs::recursive_directory_iterator(root / dir)) {
      const std::string ext = entry.path().extension().string();
      if (ext == ".h" || ext == ".cmake" ||
          (ext == ".cc" && absl::StrContains(entry.path().string(),
                                             "tests/conformance/suite_"))) {
        absl::StrAppend(&all, Read(entry.path()), "\n");
      }
    }
  }
  return all;
}

// Whether a source directly in `dir` registers a scheme: a folder that only
// holds a client library (backends/etcd until its backend lands) is no
// backend yet.
bool RegistersAScheme(const fs::path& dir) {
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".cc" &&
        absl::StrContains(Read(entry.path()), "RegisterBackend(")) {
      return true;
    }
  }
  return false;
}

bool HasWord(const std::string& text, const std::string& word) {
  return std::regex_search(text, std::regex("\\b" + word + "\\b"));
}

class BackendGuideTest : public ::testing::Test {
 protected:
  const fs::path root_ = DLOCK_SOURCE_DIR;
  const std::string page_ = Read(root_ / "docs/writing-a-backend.md");
};

TEST_F(BackendGuideTest, EveryPathItNamesExists) {
  ASSERT_FALSE(page_.empty());
  int checked = 0;
  for (const std::string& span : CodeSpans(page_)) {
    // A path: no spaces, a '/', no placeholder.
    if (span.find(' ') != std::string::npos ||
        span.find('/') == std::string::npos ||
        span.find('<') != std::string::npos ||
        span.find("://") != std::string::npos) {
      continue;
    }
    fs::path path = absl::StartsWith(span, "dlock/")
                        ? root_ / "core/include" / span
                        : root_ / span;
    EXPECT_TRUE(fs::exists(path)) << "docs/writing-a-backend.md names `" << span
                                  << "`, which does not exist";
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

TEST_F(BackendGuideTest, EveryApiNameItUsesIsDeclared) {
  const std::string declared = Declarations(root_);
  // Names of dlock's API: identifiers, maybe qualified (Uri::Redacted),
  // maybe a call (LeaseMillis()) or a field (BackendConfig::options.x).
  const std::regex api(
      "[A-Za-z_][A-Za-z0-9_]*((::|\\.)[A-Za-z_][A-Za-z0-9_]*)*"
      "(\\(\\))?");
  int checked = 0;
  for (const std::string& span : CodeSpans(page_)) {
    // A file name is a path, not an API name.
    if (!std::regex_match(span, api) ||
        std::regex_search(span, std::regex("\\.(txt|md|cc|h|cmake)$"))) {
      continue;
    }
    std::string name = span;
    if (absl::EndsWith(name, "()")) name.resize(name.size() - 2);
    for (absl::string_view part :
         absl::StrSplit(name, absl::ByAnyChar(":."), absl::SkipEmpty())) {
      EXPECT_TRUE(HasWord(declared, std::string(part)))
          << "docs/writing-a-backend.md uses `" << span << "`, but `" << part
          << "` is declared nowhere a backend author looks";
      ++checked;
    }
  }
  EXPECT_GT(checked, 40);
}

// Every backend this build registers has a folder that the page's recipe
// describes: a CMakeLists.txt declaring it, a registration for the tests,
// and a row in the docs' traits table.
TEST_F(BackendGuideTest, EveryBackendFollowsTheRecipe) {
  const std::string backends_md = Read(root_ / "docs/backends.md");
  int seen = 0;
  for (const fs::directory_entry& dir :
       fs::directory_iterator(root_ / "backends")) {
    if (!dir.is_directory() || !RegistersAScheme(dir.path())) continue;
    const std::string name = dir.path().filename().string();
    const std::string cmake = Read(dir.path() / "CMakeLists.txt");
    EXPECT_TRUE(
        absl::StrContains(cmake, absl::StrCat("dlock_add_backend(", name)))
        << name;
    EXPECT_TRUE(fs::exists(root_ / "integration" /
                           absl::StrCat(name, "_registration.cc")))
        << name << " has no test registration";
    EXPECT_TRUE(absl::StrContains(backends_md, absl::StrCat("| ", name)))
        << name << " has no row in docs/backends.md";
    ++seen;
  }
  EXPECT_GE(seen, 4);
}

}  // namespace
}  // namespace dlock
