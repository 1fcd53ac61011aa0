// `dlock run` hands its command nothing but stdin, stdout and stderr: not
// the client's sockets (hiredis does not set close-on-exec), not the
// ZooKeeper client's pipe, not whatever dlock itself inherited. The test
// reads the running command's /proc/PID/fd from outside, so nothing the
// listing opens is counted. One ctest entry, so each server starts once.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
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

// fd -> what it refers to ("socket:[123]", "pipe:[456]", a path), of `pid`.
std::map<int, std::string> OpenDescriptors(pid_t pid) {
  std::map<int, std::string> fds;
  const std::string dir = absl::StrCat("/proc/", pid, "/fd");
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return fds;
  while (dirent* entry = readdir(d)) {
    int fd = 0;
    if (!absl::SimpleAtoi(entry->d_name, &fd)) continue;  // "." and ".."
    char target[512];
    const std::string link = absl::StrCat(dir, "/", entry->d_name);
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    fds[fd] = n < 0 ? "?" : std::string(target, n);
  }
  closedir(d);
  return fds;
}

std::string Describe(const std::map<int, std::string>& fds) {
  return absl::StrJoin(fds, ", ", [](std::string* out, const auto& fd) {
    absl::StrAppend(out, fd.first, " -> ", fd.second);
  });
}

// Whether `pid` is blocked in nanosleep (35) or clock_nanosleep (230), the
// x86-64 numbers /proc/PID/syscall starts with.
bool InNanosleep(pid_t pid) {
  const std::string call =
      test::ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/syscall"));
  return absl::StartsWith(call, "230 ") || absl::StartsWith(call, "35 ");
}

class CliFdsTest : public ::testing::TestWithParam<test::ServerBackend> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = test::MakeTempDir("dlock-cli-fds");
    ASSERT_OK(dir);
    dir_ = *dir;
  }
  void TearDown() override { test::RemoveTree(dir_); }

  std::string dir_;
};

TEST_P(CliFdsTest, TheCommandInheritsOnlyStdinStdoutAndStderr) {
  const std::string pid_file = dir_ + "/command.pid";
  // The shell writes its pid and becomes `sleep`, which opens nothing that
  // stays open; whatever it has once asleep, it inherited.
  Process run(
      Dlock({"run", "--backend", GetParam().uri("fds"), "fds", "--", "sh", "-c",
             absl::StrCat("echo $$ > ", pid_file, ".tmp && mv ", pid_file,
                          ".tmp ", pid_file, " && exec sleep 30")}));
  pid_t pid = 0;
  ASSERT_OK(test::WaitUntil(
      [&] {
        std::string text = test::ReadFileOrEmpty(pid_file);
        if (!absl::SimpleAtoi(absl::StripTrailingAsciiWhitespace(text), &pid)) {
          return false;
        }
        // Past the exec (it is `sleep` now, not the shell) and
        // past sleep's start, whose setlocale() opens locale
        // files for a moment: asleep in (clock_)nanosleep.
        return test::ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/comm")) ==
                   "sleep\n" &&
               InNanosleep(pid);
      },
      absl::Seconds(30), "the command to start"))
      << run.err();
  const std::map<int, std::string> fds = OpenDescriptors(pid);
  EXPECT_EQ(fds.size(), 3u) << "the command has open: " << Describe(fds);
  for (int fd : {0, 1, 2}) EXPECT_EQ(fds.count(fd), 1u) << Describe(fds);
  run.Signal(SIGTERM);
  EXPECT_EQ(run.Wait(), 128 + SIGTERM) << run.err();
}

// The child closes what it inherited but keeps the close-on-exec pipe that
// reports a failed exec: the file passes the checks made before the fork,
// and only execve() finds it is not a program.
TEST(CliExecFailure, IsStillReportedThroughThePipe) {
  absl::StatusOr<std::string> dir = test::MakeTempDir("dlock-cli-exec");
  ASSERT_OK(dir);
  const std::string path = *dir + "/not-a-program";
  test::WriteFile(path, "\x01\x02 neither ELF nor a script\n");
  ASSERT_EQ(chmod(path.c_str(), 0755), 0);
  test::Result r = test::RunProcess(
      Dlock({"run", "--backend", "memory://", "n", "--", path}));
  EXPECT_EQ(r.code, 126) << r.err;
  EXPECT_THAT(r.err, ::testing::HasSubstr("Exec format error"));
  test::ExpectOneLine(r);
  test::RemoveTree(*dir);
}

INSTANTIATE_TEST_SUITE_P(
    Backends, CliFdsTest, ::testing::ValuesIn(test::ServerBackends()),
    [](const ::testing::TestParamInfo<test::ServerBackend>& info) {
      return info.param.label;
    });

}  // namespace
}  // namespace dlock
