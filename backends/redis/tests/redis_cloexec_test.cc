// A program that uses dlock and then execs (a shell-out, a job runner) must
// not hand its Redis connections to the new program: the transport opens
// every socket close-on-exec (hiredis 0.14, which opened them without, no
// longer opens any).
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/dlock.h"
#include "gtest/gtest.h"
#include "redis_server.h"
#include "status_testing.h"

namespace dlock {
namespace {

// fd -> what it refers to ("socket:[123]", a path), of this process.
std::map<int, std::string> OpenDescriptors() {
  std::map<int, std::string> fds;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return fds;
  const int listing = dirfd(d);
  while (dirent* entry = readdir(d)) {
    int fd = 0;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == listing) continue;
    char target[512];
    const std::string link = absl::StrCat("/proc/self/fd/", entry->d_name);
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    fds[fd] = n < 0 ? "?" : std::string(target, n);
  }
  closedir(d);
  return fds;
}

TEST(RedisBackend, ItsSocketsAreClosedOnExec) {
  absl::StatusOr<std::unique_ptr<test::RedisServer>> server =
      test::RedisServer::Start();
  ASSERT_OK(server);
  const std::map<int, std::string> before = OpenDescriptors();
  // Connect opens the command connection and the subscriber's.
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      Connect((*server)->Uri("cloexec"));
  ASSERT_OK(client);
  absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
      (*client)->GetLock("x");
  ASSERT_OK(lock);
  absl::StatusOr<Hold> hold = (*lock)->Acquire({.wait = absl::Seconds(5)});
  ASSERT_OK(hold);

  int sockets = 0;
  for (const auto& [fd, target] : OpenDescriptors()) {
    if (before.count(fd) != 0) continue;
    if (absl::StartsWith(target, "socket:")) ++sockets;
    const int flags = fcntl(fd, F_GETFD);
    ASSERT_GE(flags, 0) << fd;
    EXPECT_TRUE(flags & FD_CLOEXEC)
        << "fd " << fd << " (" << target << ") would be inherited by exec";
  }
  EXPECT_GE(sockets, 2);
  EXPECT_OK(hold->Release());
}

}  // namespace
}  // namespace dlock
