#include "proc_state.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dlock::test {
namespace {

// "pid (comm) S ...": the state follows the last ')', since comm may hold
// one.
char StateIn(const std::string& stat_path) {
  std::ifstream stat(stat_path);
  std::string text((std::istreambuf_iterator<char>(stat)),
                   std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return 0;
  return text[paren + 2];
}

}  // namespace

pid_t ThreadId() { return static_cast<pid_t>(syscall(SYS_gettid)); }

char ProcessState(pid_t pid) {
  return StateIn(absl::StrCat("/proc/", pid, "/stat"));
}

char ThreadState(pid_t tid) {
  return StateIn(absl::StrCat("/proc/self/task/", tid, "/stat"));
}

bool AsleepInKernel(pid_t tid) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  int asleep = 0;
  while (absl::Now() < deadline) {
    asleep = ThreadState(tid) == 'S' ? asleep + 1 : 0;
    if (asleep >= 5) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

}  // namespace dlock::test
