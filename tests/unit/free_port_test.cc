// Copyright dlock authors. FreeLoopbackPort(), which every throwaway server
// of the tests starts on: ctest runs several test programs at once, and a
// port that another program's server, or any client connection's local
// end, takes before ours binds it makes our server exit ("Address already
// in use") while the other one answers in its place.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "status_testing.h"

namespace dlock::test {
namespace {

// Client connections take their local ports from the ephemeral range.
TEST(FreeLoopbackPort, IsBelowTheKernelsEphemeralRange) {
  const int ephemeral_low = EphemeralPortLow();
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<int> port = FreeLoopbackPort();
    ASSERT_OK(port);
    EXPECT_LT(*port, ephemeral_low);
    EXPECT_GE(*port, 1024);
  }
}

// Each port is handed out once while its claimer lives, also across
// processes: a child's ports are never the parent's.
TEST(FreeLoopbackPort, NeverTheSamePortTwiceWhileItsClaimerLives) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipe_fds[0]);
    for (int i = 0; i < 300; ++i) {
      absl::StatusOr<int> port = FreeLoopbackPort();
      const int value = port.ok() ? *port : -1;
      if (write(pipe_fds[1], &value, sizeof(value)) != sizeof(value)) _exit(2);
    }
    close(pipe_fds[1]);
    pause();  // alive, so its claims hold, until the parent kills it
    _exit(0);
  }
  close(pipe_fds[1]);
  // Killed however the test ends: a failed ASSERT returns early.
  struct KillChild {
    pid_t pid;
    ~KillChild() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } kill_child{child};
  std::set<int> child_ports;
  int value = 0;
  while (read(pipe_fds[0], &value, sizeof(value)) == sizeof(value)) {
    ASSERT_GT(value, 0) << "the child got no port";
    EXPECT_TRUE(child_ports.insert(value).second) << value << " twice";
    if (child_ports.size() == 300) break;
  }
  close(pipe_fds[0]);
  ASSERT_EQ(child_ports.size(), 300u);
  std::set<int> ours;
  for (int i = 0; i < 300; ++i) {
    absl::StatusOr<int> port = FreeLoopbackPort();
    ASSERT_OK(port);
    EXPECT_TRUE(ours.insert(*port).second) << *port << " twice";
    EXPECT_EQ(child_ports.count(*port), 0u) << *port << " is the child's";
  }
}

}  // namespace
}  // namespace dlock::test
