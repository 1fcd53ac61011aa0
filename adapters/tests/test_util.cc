#include "test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server_process.h"

extern char** environ;

namespace dlock::test {

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

Process::Process(const std::vector<std::string>& argv,
                 const std::vector<std::string>& env) {
  absl::StatusOr<std::string> dir = MakeTempDir("dlock-proc");
  dir_ = dir.ok() ? *dir : "/tmp";
  out_path_ = dir_ + "/out";
  err_path_ = dir_ + "/err";
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  for (const std::string& e : env) env_strings.push_back(e);
  std::vector<char*> c_argv, c_env;
  std::vector<std::string> argv_copy = argv;
  for (std::string& a : argv_copy) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  for (std::string& e : env_strings) c_env.push_back(e.data());
  c_env.push_back(nullptr);
  const int out = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_ = fork();
  if (pid_ == 0) {
    dup2(out, 1);
    dup2(err, 2);
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    execvpe(c_argv[0], c_argv.data(), c_env.data());
    _exit(127);
  }
  close(out);
  close(err);
}

Process::~Process() {
  if (Wait(absl::ZeroDuration()) == -1 && pid_ > 0) {
    kill(pid_, SIGKILL);
    Wait(absl::Seconds(10));
  }
  if (dir_ != "/tmp") RemoveTree(dir_);
}

int Process::Wait(absl::Duration timeout) {
  if (pid_ <= 0 || code_ != -1) return code_;
  const absl::Time give_up = absl::Now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return code_;
    }
    if (r < 0 || absl::Now() >= give_up) return -1;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

void Process::Signal(int sig) {
  if (pid_ > 0 && code_ == -1) kill(pid_, sig);
}

Result RunProcess(const std::vector<std::string>& argv,
                  const std::vector<std::string>& env, absl::Duration timeout) {
  Process p(argv, env);
  int code = p.Wait(timeout);
  if (code == -1) {
    p.Signal(SIGKILL);
    p.Wait();
  }
  return Result{code, p.out(), p.err()};
}

Result RunShell(const std::string& script, const std::vector<std::string>& env,
                absl::Duration timeout) {
  return RunProcess({"bash", "-euo", "pipefail", "-c", script}, env, timeout);
}

}  // namespace dlock::test
