// Copyright dlock authors. Backend URIs:
// scheme://[user[:pw]@]hosts[/path][?k=v&...]
#ifndef DLOCK_URI_H_
#define DLOCK_URI_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dlock {

struct HostPort {
  std::string host;
  std::optional<uint16_t> port;
};

// A parsed URI. Every part is percent-decoded.
struct Uri {
  std::string scheme;  // lower case
  std::string user;
  std::optional<std::string> password;
  std::vector<HostPort> hosts;  // comma-separated list in the authority
  std::string path;             // without the leading '/'
  std::vector<std::pair<std::string, std::string>> params;

  // The URI with any password replaced by "***": safe for messages and logs.
  std::string Redacted() const;
};

absl::StatusOr<Uri> ParseUri(absl::string_view text);

// Reads a URI's query parameters by type, remembering which were used, so
// that a backend can reject options it does not know (InvalidArgument naming
// the key). Messages name the key and show the expected form.
class UriParams {
 public:
  explicit UriParams(const Uri& uri);

  std::optional<std::string> TakeString(absl::string_view key);
  absl::StatusOr<std::optional<absl::Duration>> TakeDuration(
      absl::string_view key);
  absl::StatusOr<std::optional<int64_t>> TakeInt(absl::string_view key,
                                                 int64_t min, int64_t max);
  // Everything not yet taken, in URI order.
  std::vector<std::pair<std::string, std::string>> Rest() const;
  // InvalidArgument naming the first key nobody took (UnknownUriOption).
  absl::Status RejectUnknown(absl::string_view scheme,
                             absl::string_view known) const;

 private:
  std::vector<std::pair<std::string, std::string>> params_;
  std::vector<bool> taken_;
};

// InvalidArgument for option `key` that a `scheme`:// URI does not take:
// names the key, the scheme's own options (`known`) and those every scheme
// takes.
absl::Status UnknownUriOption(absl::string_view scheme, absl::string_view key,
                              absl::string_view known);

// Parses "500ms", "30s", "2m", "1h", "1d", "1.5s": a positive duration up to
// kLongestLease, as ParseDuration(text, kPositiveDuration) (dlock/duration.h).
absl::StatusOr<absl::Duration> ParsePositiveDuration(absl::string_view text);

}  // namespace dlock

#endif  // DLOCK_URI_H_
