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

// "host:port" as a client library dials it: an IPv6 address in brackets,
// `default_port` where the URI gave none.
std::string DialAddress(const HostPort& host_port, uint16_t default_port);

// A parsed URI. Every part is percent-decoded; changing a part and printing
// the URI again is how code edits one (never by editing the text).
struct Uri {
  std::string scheme;  // lower case
  std::string user;
  std::optional<std::string> password;
  std::vector<HostPort> hosts;  // comma-separated list in the authority
  std::string path;             // without the leading '/'
  std::vector<std::pair<std::string, std::string>> params;

  // The URI as text, each part percent-encoded where it must be, so that
  // ParseUri() gives this Uri back. It holds the password: for Connect(),
  // never for a message.
  std::string ToString() const;
  // The same with any password replaced by "***": safe for messages and
  // logs. It hides the user info's password and the value of every option
  // named like a credential (IsSecretOption).
  std::string Redacted() const;

  // Where this URI carries a password or another secret, said without
  // quoting it ("the user info (USER:PASSWORD@)", "option 'password'",
  // "option 'auth' (digest:USER:PASSWORD)"); nullopt when it carries none.
  // `auth=digest:USER` names a user only, and carries none.
  std::optional<std::string> SecretPart() const;
};

// Whether option `key` holds a credential whose value is never shown: any
// key with "password", "passwd", "pwd" or "secret" in it, and "auth", in
// any case.
bool IsSecretOption(absl::string_view key);

absl::StatusOr<Uri> ParseUri(absl::string_view text);

// What a message may show of a text ParseUri() refused: its scheme
// ("redis://...") or "(not a URI)"; the rest may hold a password.
std::string RedactUnparsable(absl::string_view text);

// Reads a URI's query parameters by type, remembering which were used, so
// that a backend can reject options it does not know (InvalidArgument naming
// the key), and which were asked for, so that the rejection lists them.
// Messages name the key and show the expected form.
class UriParams {
 public:
  explicit UriParams(const Uri& uri);

  // Each Take* records `key` as an option the reader knows, given or not.
  std::optional<std::string> TakeString(absl::string_view key);
  absl::StatusOr<std::optional<absl::Duration>> TakeDuration(
      absl::string_view key);
  absl::StatusOr<std::optional<int64_t>> TakeInt(absl::string_view key,
                                                 int64_t min, int64_t max);
  // Everything not yet taken, in URI order.
  std::vector<std::pair<std::string, std::string>> Rest() const;
  // Marks the options asked for so far as every scheme's (the core takes
  // them before the backend's factory): RejectUnknown() lists them apart.
  void EndCommonOptions() { scheme_options_from_ = asked_.size(); }
  // InvalidArgument naming the first key nobody took, and the options
  // `scheme` asked for (UnknownUriOption).
  absl::Status RejectUnknown(absl::string_view scheme) const;

 private:
  std::vector<std::pair<std::string, std::string>> params_;
  std::vector<bool> taken_;
  std::vector<std::string> asked_;  // in the order asked, once each
  size_t scheme_options_from_ = 0;
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
