#include "cli_common.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "dlock/errors.h"
#include "dlock/uri.h"
#include "nlohmann/json.hpp"

namespace dlock::cli {

void AddBackendFlags(CLI::App& command, BackendFlags& flags, bool json) {
  CLI::Option* backend = command.add_option(
      "--backend", flags.backend,
      "Backend URI, e.g. redis://127.0.0.1:6379 (default: $DLOCK_BACKEND)");
  CLI::Option* profile = command.add_option(
      "--profile", flags.profile,
      "Profile from the config file (default: $DLOCK_PROFILE)");
  backend->excludes(profile);
  command.add_option("--config", flags.config,
                     "TOML config file with profiles (default: $DLOCK_CONFIG)");
  command.add_option("--namespace", flags.lock_namespace,
                     "Lock namespace (default: the URI's or profile's)");
  if (json)
    command.add_flag("--json", flags.json, "Print JSON instead of text");
}

absl::StatusOr<absl::Duration> DurationFlag(absl::string_view flag,
                                            absl::string_view text,
                                            DurationRange range) {
  absl::StatusOr<absl::Duration> d = ParseDuration(text, range);
  if (!d.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", d.status().message()));
  }
  return d;
}

int ExitCodeFor(const absl::Status& status) {
  // A code of its own, so that a retry loop stops: a wrong password stays
  // wrong.
  if (IsAccessRefused(status)) return kRefused;
  // Refused by the object's configuration (a semaphore's N in force): no
  // retry with the same flags gets in either.
  if (IsLimitMismatch(status)) return kRefused;
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:  // a config file or profile
      return kUsage;
    case absl::StatusCode::kUnavailable:
      return kUnreachable;
    case absl::StatusCode::kDeadlineExceeded:
      return kNotAcquired;
    default:
      return kFailed;
  }
}

int Fail(int code, absl::string_view message) {
  std::string line = absl::StrCat("dlock: ", message);
  // One line, whatever the message holds.
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  line.push_back('\n');
  std::fputs(line.c_str(), stderr);
  return code;
}

int Fail(const absl::Status& status) {
  return Fail(ExitCodeFor(status), status.message());
}

absl::StatusOr<Profile> ResolveProfile(const BackendFlags& flags) {
  return ResolveBackend(BackendSelection{.uri = flags.backend,
                                         .profile = flags.profile,
                                         .config_path = flags.config});
}

void WarnIfTlsUnchecked(const Profile& profile) {
  absl::StatusOr<Uri> uri = ParseUri(profile.backend);
  if (!uri.ok()) return;  // connecting says what is wrong
  for (const auto& [key, value] : uri->params) {
    if (key != "tls_insecure_skip_verify" || value != "true") continue;
    static std::once_flag once;
    std::call_once(once, [] {
      std::fputs(
          "dlock: warning: tls_insecure_skip_verify=true: the server's TLS "
          "certificate and name are not checked, so anyone on the network "
          "path can pose as the server\n",
          stderr);
    });
  }
}

namespace {

// A namespace named twice, told in the CLI's words (the flag, the profile,
// the URI's option) before the client's own check would name ClientOptions.
absl::Status CheckNamespaceGivenOnce(const Profile& profile,
                                     const BackendFlags& flags) {
  absl::StatusOr<Uri> uri = ParseUri(profile.backend);
  if (!uri.ok()) return absl::OkStatus();  // told when connecting
  for (const auto& [key, value] : uri->params) {
    if (key != "namespace") continue;
    if (!flags.lock_namespace.empty() && flags.lock_namespace != value) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--namespace '", flags.lock_namespace,
          "' and the backend URI's namespace=", value, " differ; give one"));
    }
    if (flags.lock_namespace.empty() && !profile.lock_namespace.empty() &&
        profile.lock_namespace != value) {
      return absl::InvalidArgumentError(absl::StrCat(
          "profile '", profile.name, "' (", profile.origin, "): namespace '",
          profile.lock_namespace, "' and its backend URI's namespace=", value,
          " differ; give one"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LockClient>> ConnectWith(
    Profile profile, const BackendFlags& flags, ClientOptions options) {
  if (absl::Status s = CheckNamespaceGivenOnce(profile, flags); !s.ok()) {
    return s;
  }
  WarnIfTlsUnchecked(profile);
  if (!flags.lock_namespace.empty()) {
    profile.lock_namespace = flags.lock_namespace;
  }
  return ConnectProfile(profile, std::move(options));
}

std::unique_ptr<LockClient> ConnectOrFail(const BackendFlags& flags,
                                          int& exit_code,
                                          ClientOptions options) {
  absl::StatusOr<Profile> profile = ResolveProfile(flags);
  if (!profile.ok()) {
    exit_code = Fail(profile.status());
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      ConnectWith(*profile, flags, std::move(options));
  if (!client.ok()) {
    exit_code = Fail(client.status());
    return nullptr;
  }
  return *std::move(client);
}

int BlockedSignalFd(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

int ReadSignal(int signal_fd) {
  signalfd_siginfo info;
  if (read(signal_fd, &info, sizeof(info)) != sizeof(info)) return 0;
  return static_cast<int>(info.ssi_signo);
}

std::string DumpJson(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false,
                    nlohmann::ordered_json::error_handler_t::replace);
}

std::string JsonString(absl::string_view text) {
  return DumpJson(nlohmann::ordered_json(std::string(text)));
}

}  // namespace dlock::cli
