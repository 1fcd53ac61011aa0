#include "setup_command.h"

#include <cstdio>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dlock::cli {
namespace {

// `value` for a URI query: every byte but [A-Za-z0-9_.-] percent-encoded.
std::string QueryValue(const std::string& value) {
  std::string out;
  for (unsigned char c : value) {
    if (absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '-') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&out, "%%%02X", c);
    }
  }
  return out;
}

}  // namespace

int SetupCommand(const BackendFlags& flags, const std::string& grant_to) {
  absl::StatusOr<Profile> profile = ResolveProfile(flags);
  if (!profile.ok()) return Fail(profile.status());
  const std::string shown = profile->DisplayBackend();
  if (!grant_to.empty()) {
    const char sep =
        profile->backend.find('?') == std::string::npos ? '?' : '&';
    absl::StrAppend(&profile->backend, std::string(1, sep),
                    "grant_to=", QueryValue(grant_to));
  }
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      ConnectWith(*profile, flags);
  if (!client.ok()) return Fail(client.status());
  if (absl::Status closed = (*client)->Close(); !closed.ok()) {
    return Fail(closed);
  }
  std::printf(
      "%s: ready (what dlock keeps there is created and up to date%s)\n",
      (*client)->endpoint().c_str(),
      grant_to.empty()
          ? ""
          : absl::StrCat("; ", grant_to, " has what dlock needs").c_str());
  return kOk;
}

}  // namespace dlock::cli
