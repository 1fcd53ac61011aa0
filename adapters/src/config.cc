// Config files are parsed by toml++ (Debian's libtomlplusplus-dev); this file
// only maps its tree onto Profile and words the errors.
#include "dlock/adapters/config.h"

#include <toml++/toml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dlock/duration.h"
#include "dlock/uri.h"

namespace dlock {
namespace {

constexpr char kProfileKeys[] =
    "backend, namespace, default_lease, default_wait, connect_timeout, "
    "operation_timeout (or command_timeout), close_timeout, fallback_poll, "
    "username, password_env, password_file";

constexpr char kPasswordGoesElsewhere[] =
    "must not be in a profile file: take it out of the URI and set "
    "password_env (the name of an environment variable that holds it) or "
    "password_file (the path of a file that holds it)";

// Whether a backend that is no URI may hold a password all the same: a
// user info ('@'), or a word like password= (libpq's key/value form,
// "host=db password=..."), auth= or secret.
bool MayHoldPassword(absl::string_view backend) {
  const std::string lower = absl::AsciiStrToLower(backend);
  for (absl::string_view word :
       {"@", "password", "passwd", "pwd", "secret", "auth="}) {
    if (absl::StrContains(lower, word)) return true;
  }
  return false;
}

// "path:line" for a node of the parsed file.
std::string Where(const std::string& path, const toml::source_region& at) {
  return absl::StrCat(path, ":", at.begin.line);
}

absl::Status BadKey(const std::string& path, const toml::source_region& at,
                    absl::string_view key, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(Where(path, at), ": ", key, ": ", what));
}

// Reads profile keys one by one, naming the file, line and key on errors.
class ProfileReader {
 public:
  ProfileReader(const std::string& path, std::string profile_name)
      : path_(path), prefix_(absl::StrCat("profiles.", profile_name)) {}

  absl::StatusOr<std::string> String(const toml::node& node,
                                     absl::string_view key) {
    std::optional<std::string> value = node.value<std::string>();
    if (!node.is_string() || !value.has_value()) {
      return BadKey(path_, node.source(), Key(key), "must be a string");
    }
    return *value;
  }

  absl::StatusOr<absl::Duration> Duration(
      const toml::node& node, absl::string_view key, bool wait,
      DurationRange range = kPositiveDuration) {
    absl::StatusOr<std::string> text = String(node, key);
    if (!text.ok()) return text.status();
    absl::StatusOr<absl::Duration> d =
        wait ? ParseWait(*text) : ParseDuration(*text, range);
    if (!d.ok())
      return BadKey(path_, node.source(), Key(key), d.status().message());
    return *d;
  }

  std::string Key(absl::string_view key) const {
    return absl::StrCat(prefix_, ".", key);
  }

 private:
  const std::string& path_;
  const std::string prefix_;
};

absl::Status ReadProfileKey(ProfileReader& reader, const std::string& path,
                            const std::string& key, const toml::node& node,
                            Profile& profile) {
  auto take_string = [&](std::string& out) -> absl::Status {
    absl::StatusOr<std::string> v = reader.String(node, key);
    if (!v.ok()) return v.status();
    out = *std::move(v);
    return absl::OkStatus();
  };
  auto take_duration = [&](absl::Duration& out, bool wait,
                           DurationRange range =
                               kPositiveDuration) -> absl::Status {
    absl::StatusOr<absl::Duration> v = reader.Duration(node, key, wait, range);
    if (!v.ok()) return v.status();
    out = *v;
    return absl::OkStatus();
  };
  auto take_optional = [&](std::optional<absl::Duration>& out) -> absl::Status {
    absl::Duration d;
    absl::Status s = take_duration(d, /*wait=*/false);
    if (s.ok()) out = d;
    return s;
  };
  if (key == "backend") {
    if (absl::Status s = take_string(profile.backend); !s.ok()) return s;
    absl::StatusOr<Uri> uri = ParseUri(profile.backend);
    if (!uri.ok()) {
      return BadKey(path, node.source(), reader.Key(key),
                    absl::StrCat(uri.status().message(),
                                 MayHoldPassword(profile.backend)
                                     ? absl::StrCat("; and a password ",
                                                    kPasswordGoesElsewhere)
                                     : ""));
    }
    if (std::optional<std::string> secret = uri->SecretPart()) {
      // The file would then hold a secret anyone with read access can see.
      return BadKey(path, node.source(), reader.Key(key),
                    absl::StrCat("holds a password, in ", *secret, "; it ",
                                 kPasswordGoesElsewhere));
    }
    return absl::OkStatus();
  }
  if (key == "namespace") return take_string(profile.lock_namespace);
  if (key == "default_lease") {
    return take_duration(profile.default_lease, false,
                         {.min = kMinWatchdogLease, .max = kLongestLease});
  }
  if (key == "default_wait") return take_duration(profile.default_wait, true);
  if (key == "connect_timeout") return take_optional(profile.connect_timeout);
  if (key == "operation_timeout" || key == "command_timeout") {
    // command_timeout is operation_timeout's older name: one value for both.
    const std::optional<absl::Duration> other = profile.operation_timeout;
    if (absl::Status s = take_optional(profile.operation_timeout); !s.ok()) {
      return s;
    }
    if (other.has_value() && *other != *profile.operation_timeout) {
      return BadKey(path, node.source(), reader.Key(key),
                    "differs from the other of operation_timeout and "
                    "command_timeout (its older name); give one");
    }
    return absl::OkStatus();
  }
  if (key == "close_timeout") return take_optional(profile.close_timeout);
  if (key == "fallback_poll") return take_optional(profile.fallback_poll);
  if (key == "username") return take_string(profile.username);
  if (key == "password_env") return take_string(profile.password_env);
  if (key == "password_file") return take_string(profile.password_file);
  return BadKey(path, node.source(), reader.Key(key),
                absl::StrCat("unknown key; a profile takes ", kProfileKeys));
}

absl::StatusOr<Profile> ReadProfile(const std::string& path,
                                    const std::string& name,
                                    const toml::node& node) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    return BadKey(path, node.source(), absl::StrCat("profiles.", name),
                  "must be a table ([profiles.NAME])");
  }
  Profile profile;
  profile.name = name;
  profile.origin = Where(path, node.source());
  ProfileReader reader(path, name);
  for (const auto& [key, value] : *table) {
    absl::Status s =
        ReadProfileKey(reader, path, std::string(key.str()), value, profile);
    if (!s.ok()) return s;
  }
  if (profile.backend.empty()) {
    return BadKey(path, node.source(), reader.Key("backend"),
                  "missing; every profile needs a backend URI");
  }
  if (!profile.password_env.empty() && !profile.password_file.empty()) {
    return BadKey(path, node.source(), reader.Key("password_env"),
                  "give password_env or password_file, not both");
  }
  return profile;
}

std::string SystemError(int error) { return std::strerror(error); }

}  // namespace

std::string Profile::DisplayBackend() const {
  absl::StatusOr<Uri> uri = ParseUri(backend);
  // Unparseable: the scheme only, since the rest may hold a secret.
  return uri.ok() ? uri->Redacted() : RedactUnparsable(backend);
}

absl::StatusOr<Profile> Config::Find(absl::string_view name) const {
  auto it = profiles.find(std::string(name));
  if (it != profiles.end()) return it->second;
  std::vector<std::string> names;
  for (const auto& [n, p] : profiles) names.push_back(n);
  return absl::NotFoundError(
      absl::StrCat(path, ": no profile '", name, "'; it has ",
                   names.empty() ? "none" : absl::StrJoin(names, ", ")));
}

absl::StatusOr<Config> ParseConfig(absl::string_view toml_text,
                                   const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(std::string_view(toml_text.data(), toml_text.size()),
                       std::string_view(path));
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ":", e.source().begin.line, ":", e.source().begin.column, ": ",
        std::string(e.description())));
  }
  Config config;
  config.path = path;
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    if (name == "default_profile") {
      std::optional<std::string> value = node.value<std::string>();
      if (!node.is_string() || !value) {
        return BadKey(path, node.source(), name, "must be a string");
      }
      config.default_profile = *value;
    } else if (name == "profiles") {
      const toml::table* profiles = node.as_table();
      if (profiles == nullptr) {
        return BadKey(path, node.source(), name, "must be a table");
      }
      for (const auto& [profile_key, profile_node] : *profiles) {
        const std::string profile_name(profile_key.str());
        absl::StatusOr<Profile> profile =
            ReadProfile(path, profile_name, profile_node);
        if (!profile.ok()) return profile.status();
        config.profiles[profile_name] = *std::move(profile);
      }
    } else {
      return BadKey(path, key.source(), name,
                    "unknown key; the file takes default_profile and "
                    "[profiles.NAME] tables");
    }
  }
  if (!config.default_profile.empty() &&
      !config.profiles.contains(config.default_profile)) {
    const toml::node* node = root.get("default_profile");
    return BadKey(path, node->source(), "default_profile",
                  absl::StrCat("names profile '", config.default_profile,
                               "', which the file does not define"));
  }
  return config;
}

absl::StatusOr<Config> LoadConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(
        "config file '", path, "': cannot read: ", SystemError(errno)));
  }
  std::stringstream content;
  content << in.rdbuf();
  return ParseConfig(content.str(), path);
}

}  // namespace dlock
