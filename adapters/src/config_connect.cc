// Picking a backend (flags, environment, config file) and connecting with a
// profile: credentials read at the last moment and never put in a message.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "dlock/adapters/config.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/options.h"
#include "dlock/duration.h"
#include "dlock/uri.h"

namespace dlock {
namespace {

// Why `text` (no "://") is not a backend URI, with an example to copy. The
// text is quoted only when it cannot hold a password (it has no '@').
std::string NotAUriMessage(const std::string& text) {
  std::vector<std::string> schemes = RegisteredSchemes();
  std::sort(schemes.begin(), schemes.end());
  const std::string known = absl::StrCat(
      "; this build takes ", absl::StrJoin(schemes, "://, "), "://");
  const std::string shown = text.find('@') == std::string::npos
                                ? absl::StrCat("'", text, "'")
                                : "the backend (not shown: it has an '@')";
  const size_t colon = text.find(':');
  const std::string before_colon = text.substr(0, colon);
  if (colon != std::string::npos &&
      std::find(schemes.begin(), schemes.end(),
                absl::AsciiStrToLower(before_colon)) != schemes.end()) {
    // "redis:/oops", "redis:host": a scheme, then no "//".
    return absl::StrCat(shown, " is not a URI: after '", before_colon,
                        ":' write // and the host, e.g. ", before_colon,
                        "://127.0.0.1:6379", known);
  }
  const std::string example =
      text.empty() || text.find_first_of("@/?") != std::string::npos
          ? "redis://127.0.0.1:6379"
          : absl::StrCat("redis://", text,
                         text.find(':') == std::string::npos ? ":6379" : "");
  return absl::StrCat(shown, " is not a URI: it has no scheme; write e.g. ",
                      example, known);
}

// The secret a profile names, read only when connecting.
absl::StatusOr<std::optional<std::string>> ReadPassword(const Profile& p) {
  const std::string where =
      absl::StrCat("profile '", p.name, "' (", p.origin, ")");
  if (!p.password_env.empty()) {
    const char* value = std::getenv(p.password_env.c_str());
    if (value == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": password_env: environment variable ",
                       p.password_env, " is not set"));
    }
    return std::optional<std::string>(value);
  }
  if (!p.password_file.empty()) {
    std::ifstream in(p.password_file, std::ios::binary);
    if (!in) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": password_file: cannot read '", p.password_file,
                       "': ", std::strerror(errno)));
    }
    std::stringstream content;
    content << in.rdbuf();
    std::string secret = content.str();
    // Files written by `echo` end in a newline that is not part of it.
    while (!secret.empty() &&
           (secret.back() == '\n' || secret.back() == '\r')) {
      secret.pop_back();
    }
    return std::optional<std::string>(std::move(secret));
  }
  return std::optional<std::string>();
}

// The URI to connect with: the profile's credentials put into it, its
// timeouts added as the query options every backend takes. Edited as a
// parsed Uri, never as text; untouched when the profile adds nothing.
absl::StatusOr<std::string> ConnectUri(const Profile& p) {
  absl::StatusOr<std::optional<std::string>> password = ReadPassword(p);
  if (!password.ok()) return password.status();
  if (p.backend.find("://") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(p.origin, ": ", NotAUriMessage(p.backend)));
  }
  std::vector<std::pair<const char*, absl::Duration>> extra;
  if (p.connect_timeout) {
    extra.emplace_back(kConnectTimeoutOption, *p.connect_timeout);
  }
  if (p.operation_timeout) {
    extra.emplace_back(kOperationTimeoutOption, *p.operation_timeout);
  }
  if (p.username.empty() && !password->has_value() && extra.empty()) {
    return p.backend;
  }
  absl::StatusOr<Uri> uri = ParseUri(p.backend);
  if (!uri.ok()) {
    return absl::Status(
        uri.status().code(),
        absl::StrCat(p.origin, ": backend: '", p.DisplayBackend(),
                     "': ", uri.status().message()));
  }
  if (uri->password.has_value() && password->has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(p.origin,
                     ": the backend URI has a password and the profile names "
                     "another; give one"));
  }
  if (!p.username.empty()) {
    if (!uri->user.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          p.origin, ": username: the backend URI names a user already"));
    }
    uri->user = p.username;
  }
  if (password->has_value()) uri->password = **password;
  for (const auto& [key, value] : extra) {
    for (const auto& [given, unused] : uri->params) {
      if (given == key) {
        return absl::InvalidArgumentError(
            absl::StrCat(p.origin, ": ", key,
                         ": also given in the backend URI; give it once"));
      }
    }
    uri->params.emplace_back(key, absl::FormatDuration(value));
  }
  return uri->ToString();
}

}  // namespace

absl::StatusOr<Profile> ResolveBackend(const BackendSelection& selection) {
  if (!selection.uri.empty()) {
    Profile p;
    p.backend = selection.uri;
    p.origin = "the backend URI";
    return p;
  }
  const char* env_config = std::getenv(kConfigEnv);
  const std::string config_path =
      !selection.config_path.empty()
          ? selection.config_path
          : (env_config != nullptr ? std::string(env_config) : "");
  auto from_config =
      [&](const std::string& profile) -> absl::StatusOr<Profile> {
    if (config_path.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile '", profile,
                       "' needs a config file: give "
                       "--config FILE or set ",
                       kConfigEnv));
    }
    absl::StatusOr<Config> config = LoadConfig(config_path);
    if (!config.ok()) return config.status();
    if (profile.empty()) return config->Find(config->default_profile);
    return config->Find(profile);
  };
  if (!selection.profile.empty()) return from_config(selection.profile);
  if (const char* uri = std::getenv(kBackendEnv); uri != nullptr && *uri) {
    Profile p;
    p.backend = uri;
    p.origin = absl::StrCat("$", kBackendEnv);
    return p;
  }
  if (const char* profile = std::getenv(kProfileEnv);
      profile != nullptr && *profile) {
    return from_config(profile);
  }
  if (!config_path.empty()) {
    absl::StatusOr<Config> config = LoadConfig(config_path);
    if (!config.ok()) return config.status();
    if (!config->default_profile.empty()) {
      return config->Find(config->default_profile);
    }
  }
  // DLOCK_LOCK_NAME: a command of `dlock run`, which withholds the backend
  // (it may hold a password) unless asked; say so rather than leave a
  // script's author to wonder where DLOCK_BACKEND went.
  const char* lock_name = std::getenv("DLOCK_LOCK_NAME");
  const bool under_run = lock_name != nullptr && *lock_name;
  return absl::InvalidArgumentError(absl::StrCat(
      "no backend given: pass --backend URI or --profile NAME, or set ",
      kBackendEnv, " (e.g. redis://127.0.0.1:6379)",
      under_run ? absl::StrCat("; a command of `dlock run` gets ", kBackendEnv,
                               " only if the run has --pass-env ", kBackendEnv)
                : ""));
}

absl::StatusOr<std::unique_ptr<LockClient>> ConnectProfile(
    const Profile& profile, ClientOptions options) {
  absl::StatusOr<std::string> uri = ConnectUri(profile);
  if (!uri.ok()) return uri.status();
  if (!profile.lock_namespace.empty()) {
    options.lock_namespace = profile.lock_namespace;
  }
  options.watchdog_lease = profile.default_lease;
  if (profile.close_timeout) options.close_timeout = *profile.close_timeout;
  if (profile.fallback_poll) options.fallback_poll = *profile.fallback_poll;
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(*uri, options);
  if (!client.ok() && !profile.name.empty()) {
    return absl::Status(
        client.status().code(),
        absl::StrCat("profile '", profile.name, "' (", profile.origin,
                     "): ", client.status().message()));
  }
  return client;
}

absl::StatusOr<std::unique_ptr<LockClient>> ConnectFromEnv(
    ClientOptions options) {
  absl::StatusOr<Profile> profile = ResolveBackend({});
  if (!profile.ok()) return profile.status();
  return ConnectProfile(*profile, std::move(options));
}

absl::StatusOr<absl::Duration> ParseWait(absl::string_view text) {
  const absl::string_view t = absl::StripAsciiWhitespace(text);
  if (t == "forever" || t == "inf") return absl::InfiniteDuration();
  absl::StatusOr<absl::Duration> d =
      ParseDuration(t, {.min = absl::ZeroDuration(), .max = kLongestLease});
  if (!d.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text,
        "' is not a wait; write 0 (one attempt), forever, or a duration like "
        "500ms, 30s, 2m or 1d, up to ",
        FormatDurationForPeople(kLongestLease)));
  }
  return *d;
}

}  // namespace dlock
