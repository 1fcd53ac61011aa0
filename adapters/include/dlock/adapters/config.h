// Copyright dlock authors. Choosing a backend without code: a URI, the
// environment, or a TOML config file with named profiles.
//
//   # dlock.toml
//   default_profile = "local"
//
//   [profiles.local]
//   backend = "memory://dev"
//
//   [profiles.prod]
//   backend = "redis://redis.internal:6379/0"
//   namespace = "billing"
//   default_lease = "30s"      # watchdog lease (ClientOptions::watchdog_lease)
//   default_wait = "10s"       # how long tools wait for a lock by default
//   connect_timeout = "2s"     # the common URI options connect_timeout and
//   operation_timeout = "1s"   # operation_timeout: the same on every backend
//   close_timeout = "5s"       # ClientOptions::close_timeout
//   fallback_poll = "1s"       # ClientOptions::fallback_poll
//   username = "app"
//   password_env = "DLOCK_REDIS_PASSWORD"   # or password_file = "/run/..."
//
// A password never sits in the file: it comes from the environment variable
// or file the profile names, is read only when connecting, and is never put
// in a message. Every error names the file, the line and the key.
#ifndef DLOCK_ADAPTERS_CONFIG_H_
#define DLOCK_ADAPTERS_CONFIG_H_

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/client.h"

namespace dlock {

// Environment variables the resolution below reads.
inline constexpr char kBackendEnv[] = "DLOCK_BACKEND";  // a backend URI
inline constexpr char kProfileEnv[] = "DLOCK_PROFILE";  // a profile name
inline constexpr char kConfigEnv[] = "DLOCK_CONFIG";    // a config file path

struct Profile {
  std::string name;     // "" for a bare URI
  std::string backend;  // the URI; from a file, never with a password
  std::string lock_namespace;
  absl::Duration default_lease = absl::Seconds(30);
  absl::Duration default_wait = absl::InfiniteDuration();
  // The URI options every backend takes (dlock/backend/options.h). The key
  // command_timeout, the older name, also sets operation_timeout.
  std::optional<absl::Duration> connect_timeout;
  std::optional<absl::Duration> operation_timeout;
  std::optional<absl::Duration> close_timeout;
  std::optional<absl::Duration> fallback_poll;
  std::string username;
  std::string password_env;
  std::string password_file;
  std::string origin;  // "file:line" of the profile, or where the URI came from

  // The backend URI with any password masked: safe to print.
  std::string DisplayBackend() const;
};

struct Config {
  std::string path;
  std::string default_profile;
  std::map<std::string, Profile> profiles;

  // NotFound naming the file and the profiles it has.
  absl::StatusOr<Profile> Find(absl::string_view name) const;
};

// InvalidArgument "path:line: key: what is wrong" for a syntax error, an
// unknown key, a wrong type or a bad value; NotFound when unreadable.
absl::StatusOr<Config> LoadConfig(const std::string& path);
absl::StatusOr<Config> ParseConfig(absl::string_view toml_text,
                                   const std::string& path);

// What a program was told on its command line; empty fields were not given.
struct BackendSelection {
  std::string uri;          // e.g. --backend
  std::string profile;      // e.g. --profile
  std::string config_path;  // e.g. --config
};

// Picks the backend, first match wins: selection.uri; selection.profile;
// $DLOCK_BACKEND; $DLOCK_PROFILE; the config file's default_profile. The
// config file is selection.config_path, else $DLOCK_CONFIG. InvalidArgument
// saying what to give when nothing matches.
absl::StatusOr<Profile> ResolveBackend(const BackendSelection& selection);

// Reads the profile's credentials and connects. The profile's values replace
// those in `options`: watchdog_lease (default_lease), and the namespace, close
// timeout and fallback poll where the profile sets them. connect_timeout and
// operation_timeout go into the URI, where every backend takes them. Errors
// never hold the password.
absl::StatusOr<std::unique_ptr<LockClient>> ConnectProfile(
    const Profile& profile, ClientOptions options = {});

// ResolveBackend({}) then ConnectProfile(): for services whose backend comes
// from the environment alone (DLOCK_BACKEND, or DLOCK_PROFILE + DLOCK_CONFIG).
absl::StatusOr<std::unique_ptr<LockClient>> ConnectFromEnv(
    ClientOptions options = {});

// Parses a wait: "0" (one attempt), "forever", or a positive duration like
// 500ms, 30s, 2m.
absl::StatusOr<absl::Duration> ParseWait(absl::string_view text);

}  // namespace dlock

#endif  // DLOCK_ADAPTERS_CONFIG_H_
