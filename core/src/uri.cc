#include "dlock/uri.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "dlock/backend/options.h"
#include "dlock/duration.h"

namespace dlock {
namespace {

// Messages never quote the whole URI: it may carry a password.
absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed URI: ", what));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = absl::ascii_tolower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

absl::StatusOr<std::string> PercentDecode(absl::string_view in,
                                          absl::string_view part) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    int hi = i + 2 < in.size() ? HexValue(in[i + 1]) : -1;
    int lo = i + 2 < in.size() ? HexValue(in[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      return Malformed(absl::StrCat("bad percent escape in the ", part));
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

// Where a host of the authority sits, for messages that cannot quote it.
struct HostContext {
  absl::string_view scheme;
  int index;          // 1-based
  int count;          // hosts in the list
  bool has_userinfo;  // the authority had a '@'
};

// "the host", or "host 2 of 3" in a list: messages cannot quote it.
std::string WhichHost(const HostContext& where) {
  if (where.count < 2) return "the host";
  return absl::StrCat("host ", where.index, " of ", where.count);
}

// A host error. Without a '@', "user:password" parses as "host:port", so
// the port may be a password: it is never quoted, and the message says how
// to write what was probably meant.
absl::Status HostError(const HostContext& where, absl::string_view problem,
                       absl::string_view unquoted = "") {
  std::string message(problem);
  if (!where.has_userinfo) {
    absl::StrAppend(&message, unquoted,
                    "; if this is a user:password, end it with '@' and the "
                    "host, as in ",
                    where.scheme,
                    "://user:password@host, percent-encoding '/', '?' and "
                    "'#' in it as %2F, %3F and %23");
  }
  return Malformed(message);
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text,
                                       const HostContext& where) {
  HostPort hp;
  absl::string_view port_text;
  if (!text.empty() && text.front() == '[') {  // [IPv6]:port
    size_t close = text.find(']');
    if (close == absl::string_view::npos) {
      return Malformed("unclosed '[' in a host");
    }
    hp.host = std::string(text.substr(1, close - 1));
    absl::string_view after = text.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Malformed("junk after ']' in a host");
      port_text = after.substr(1);
    }
  } else {
    size_t colon = text.find(':');
    if (colon == absl::string_view::npos) {
      hp.host = std::string(text);
    } else {
      // "user:password:port" lands here too, so quote nothing.
      if (text.find(':', colon + 1) != absl::string_view::npos) {
        return HostError(where, absl::StrCat(WhichHost(where),
                                             " has more than one ':'; write an "
                                             "IPv6 address in brackets, as in "
                                             "[::1]:6379"));
      }
      hp.host = std::string(text.substr(0, colon));
      port_text = text.substr(colon + 1);
    }
  }
  if (!port_text.empty() || absl::EndsWith(text, ":")) {
    int port = 0;
    if (!absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
      return HostError(where,
                       absl::StrCat("the port of ", WhichHost(where),
                                    " is not a number from 1 to 65535"),
                       " (it is not shown, as it may be a password)");
    }
    hp.port = static_cast<uint16_t>(port);
  }
  return hp;
}

// user:password@ before the hosts: the last '@' ends it, the first ':'
// splits it.
absl::Status ParseUserInfo(absl::string_view userinfo, Uri& uri) {
  absl::string_view user = userinfo;
  if (size_t colon = userinfo.find(':'); colon != absl::string_view::npos) {
    user = userinfo.substr(0, colon);
    absl::StatusOr<std::string> pw =
        PercentDecode(userinfo.substr(colon + 1), "password");
    if (!pw.ok()) return pw.status();
    uri.password = *std::move(pw);
  }
  absl::StatusOr<std::string> decoded = PercentDecode(user, "user name");
  if (!decoded.ok()) return decoded.status();
  uri.user = *std::move(decoded);
  return absl::OkStatus();
}

// The name of a secret option as messages may show it: a name with an
// '=', '&' or other odd byte may be the secret itself, escaped into the key
// ("password%3Dhunter2"), so it is shown as "***".
std::string SecretOptionName(absl::string_view key) {
  for (char c : key) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '-' && c != '.') {
      return "***";
    }
  }
  return std::string(key);
}

absl::Status ParseHosts(absl::string_view authority, bool has_userinfo,
                        Uri& uri) {
  if (authority.empty()) return absl::OkStatus();
  const std::vector<absl::string_view> parts = absl::StrSplit(authority, ',');
  HostContext where{.scheme = uri.scheme,
                    .index = 0,
                    .count = static_cast<int>(parts.size()),
                    .has_userinfo = has_userinfo};
  for (absl::string_view part : parts) {
    ++where.index;
    if (part.empty()) return Malformed("an empty host in the host list");
    absl::StatusOr<std::string> decoded = PercentDecode(part, "host");
    if (!decoded.ok()) return decoded.status();
    absl::StatusOr<HostPort> hp = ParseHostPort(*decoded, where);
    if (!hp.ok()) return hp.status();
    uri.hosts.push_back(*std::move(hp));
  }
  return absl::OkStatus();
}

absl::Status ParseQuery(absl::string_view query, bool has_userinfo, Uri& uri) {
  for (absl::string_view pair : absl::StrSplit(query, '&')) {
    if (pair.empty()) continue;
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(pair, absl::MaxSplits('=', 1));
    // No option name has an '@'; a raw one is the rest of a password whose
    // '?' ended the authority ("user:6379?pw@host"), so not quoted.
    if (!has_userinfo && absl::StrContains(kv.first, '@')) {
      return Malformed(
          "an option name in the query has an '@': percent-encode '/', '?' "
          "and '#' in a user name or password as %2F, %3F and %23");
    }
    absl::StatusOr<std::string> key = PercentDecode(kv.first, "query");
    if (!key.ok()) return key.status();
    absl::StatusOr<std::string> value = PercentDecode(kv.second, "query");
    if (!value.ok()) return value.status();
    if (key->empty()) return Malformed("a query parameter without a name");
    for (const auto& [seen, unused] : uri.params) {
      if (seen == *key) {
        return Malformed(absl::StrCat("option '", *key, "' is given twice"));
      }
    }
    uri.params.emplace_back(*std::move(key), *std::move(value));
  }
  return absl::OkStatus();
}

// "scheme://" at the start of `text`: the scheme, lower case.
absl::StatusOr<std::string> ParseScheme(absl::string_view text) {
  const size_t sep = text.find("://");
  if (sep == absl::string_view::npos || sep == 0) {
    return Malformed(
        "expected scheme://..., for example redis://localhost:6379");
  }
  std::string scheme = absl::AsciiStrToLower(text.substr(0, sep));
  for (char c : scheme) {
    if (!absl::ascii_isalnum(c) && c != '+' && c != '-' && c != '.') {
      return Malformed("the scheme has a character other than a-z 0-9 + - .");
    }
  }
  return scheme;
}

// Percent-encodes every byte of `text` but the unreserved ones (RFC 3986)
// and `allowed`, which are safe where the part goes: ParseUri() splits the
// text on what is left out.
std::string PercentEncode(absl::string_view text, absl::string_view allowed) {
  std::string out;
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' ||
        c == '~' ||
        (c > 0x20 && c < 0x7F && allowed.find(c) != absl::string_view::npos)) {
      out.push_back(static_cast<char>(c));
    } else {
      // Upper case, as RFC 3986 asks of producers.
      constexpr char kHex[] = "0123456789ABCDEF";
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

// Where each part goes, what may stay as it is.
constexpr absl::string_view kUserChars = "!$&'()*+,;=";
constexpr absl::string_view kPasswordChars = "!$&'()*+,;=:";
constexpr absl::string_view kHostChars = "!$&'()*+;=";
constexpr absl::string_view kPathChars = "!$&'()*+,;=:@/";
constexpr absl::string_view kKeyChars = "!$'()*+,;:@/?";
constexpr absl::string_view kValueChars = "!$'()*+,;=:@/?";
constexpr absl::string_view kRedacted = "***";

std::string PrintHost(const HostPort& hp) {
  std::string host = hp.host.find(':') != std::string::npos
                         ? absl::StrCat("[", hp.host, "]")  // IPv6
                         : PercentEncode(hp.host, kHostChars);
  if (hp.port.has_value()) absl::StrAppend(&host, ":", *hp.port);
  return host;
}

std::string Print(const Uri& uri, bool redact) {
  std::string out = absl::StrCat(uri.scheme, "://");
  if (!uri.user.empty() || uri.password.has_value()) {
    absl::StrAppend(&out, PercentEncode(uri.user, kUserChars));
    if (uri.password.has_value()) {
      absl::StrAppend(
          &out, ":",
          redact ? kRedacted : PercentEncode(*uri.password, kPasswordChars));
    }
    absl::StrAppend(&out, "@");
  }
  std::vector<std::string> host_texts;
  for (const HostPort& hp : uri.hosts) host_texts.push_back(PrintHost(hp));
  absl::StrAppend(&out, absl::StrJoin(host_texts, ","));
  if (!uri.path.empty()) {
    absl::StrAppend(&out, "/", PercentEncode(uri.path, kPathChars));
  }
  std::vector<std::string> param_texts;
  for (const auto& [key, value] : uri.params) {
    if (redact && IsSecretOption(key)) {
      param_texts.push_back(
          absl::StrCat(SecretOptionName(key), "=", kRedacted));
      continue;
    }
    param_texts.push_back(absl::StrCat(PercentEncode(key, kKeyChars), "=",
                                       PercentEncode(value, kValueChars)));
  }
  if (!param_texts.empty()) {
    absl::StrAppend(&out, "?", absl::StrJoin(param_texts, "&"));
  }
  return out;
}

}  // namespace

absl::StatusOr<Uri> ParseUri(absl::string_view text) {
  Uri uri;
  absl::StatusOr<std::string> scheme = ParseScheme(text);
  if (!scheme.ok()) return scheme.status();
  uri.scheme = *std::move(scheme);
  absl::string_view rest = text.substr(uri.scheme.size() + 3);
  if (rest.find('#') != absl::string_view::npos) {
    return Malformed("a fragment ('#') is not allowed; percent-encode it");
  }
  absl::string_view query;
  if (size_t q = rest.find('?'); q != absl::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  absl::string_view authority = rest;
  if (size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    authority = rest.substr(0, slash);
    absl::StatusOr<std::string> path =
        PercentDecode(rest.substr(slash + 1), "path");
    if (!path.ok()) return path.status();
    uri.path = *std::move(path);
  }
  // An unescaped '/' in a password ends the authority early and would leave
  // the password to be quoted as a port or path. Only before the query: an
  // '@' in a query value (application_name=svc@host) is legal.
  const bool has_userinfo = authority.find('@') != absl::string_view::npos;
  if (!has_userinfo && rest.find('@') != absl::string_view::npos) {
    return Malformed(
        "'@' after the host: percent-encode '/', '?' and '#' in a user name "
        "or password as %2F, %3F and %23");
  }
  if (size_t at = authority.rfind('@'); at != absl::string_view::npos) {
    if (absl::Status s = ParseUserInfo(authority.substr(0, at), uri); !s.ok()) {
      return s;
    }
    authority = authority.substr(at + 1);
  }
  if (absl::Status s = ParseHosts(authority, has_userinfo, uri); !s.ok()) {
    return s;
  }
  if (absl::Status s = ParseQuery(query, has_userinfo, uri); !s.ok()) {
    return s;
  }
  return uri;
}

std::string DialAddress(const HostPort& host_port, uint16_t default_port) {
  const bool v6 = host_port.host.find(':') != std::string::npos;
  return absl::StrCat(v6 ? "[" : "", host_port.host, v6 ? "]" : "", ":",
                      host_port.port.value_or(default_port));
}

std::string Uri::ToString() const { return Print(*this, /*redact=*/false); }

std::string Uri::Redacted() const { return Print(*this, /*redact=*/true); }

std::string RedactUnparsable(absl::string_view text) {
  absl::StatusOr<std::string> scheme = ParseScheme(text);
  return scheme.ok() ? absl::StrCat(*scheme, "://...") : "(not a URI)";
}

std::optional<std::string> Uri::SecretPart() const {
  if (password.has_value()) return "the user info (USER:PASSWORD@)";
  for (const auto& [key, value] : params) {
    if (!IsSecretOption(key)) continue;
    if (absl::AsciiStrToLower(key) != "auth") {
      return absl::StrCat("option '", SecretOptionName(key), "'");
    }
    // auth=digest:USER is how a profile names a ZooKeeper user whose
    // password comes from password_env or password_file.
    absl::string_view user = value;
    if (!absl::ConsumePrefix(&user, "digest:") || user.empty() ||
        absl::StrContains(user, ':')) {
      return absl::StrCat("option '", key,
                          "' (digest:USER:PASSWORD; keep auth=digest:USER)");
    }
  }
  return std::nullopt;
}

bool IsSecretOption(absl::string_view key) {
  const std::string lower = absl::AsciiStrToLower(key);
  for (absl::string_view word : {"password", "passwd", "pwd", "secret"}) {
    if (absl::StrContains(lower, word)) return true;
  }
  return lower == "auth";
}

absl::StatusOr<absl::Duration> ParsePositiveDuration(absl::string_view text) {
  return ParseDuration(text, kPositiveDuration);
}

UriParams::UriParams(const Uri& uri)
    : params_(uri.params), taken_(uri.params.size(), false) {}

std::optional<std::string> UriParams::TakeString(absl::string_view key) {
  if (std::find(asked_.begin(), asked_.end(), key) == asked_.end()) {
    asked_.emplace_back(key);
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!taken_[i] && params_[i].first == key) {
      taken_[i] = true;
      return params_[i].second;
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<absl::Duration>> UriParams::TakeDuration(
    absl::string_view key) {
  std::optional<std::string> text = TakeString(key);
  if (!text.has_value()) return std::optional<absl::Duration>();
  absl::StatusOr<absl::Duration> d = ParsePositiveDuration(*text);
  if (!d.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("URI option '", key, "': ", d.status().message()));
  }
  return std::optional<absl::Duration>(*d);
}

absl::StatusOr<std::optional<int64_t>> UriParams::TakeInt(absl::string_view key,
                                                          int64_t min,
                                                          int64_t max) {
  std::optional<std::string> text = TakeString(key);
  if (!text.has_value()) return std::optional<int64_t>();
  int64_t value = 0;
  if (!absl::SimpleAtoi(*text, &value) || value < min || value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("URI option '", key, "' must be a whole number from ", min,
                     " to ", max, ", not '", *text, "'"));
  }
  return std::optional<int64_t>(value);
}

std::vector<std::pair<std::string, std::string>> UriParams::Rest() const {
  std::vector<std::pair<std::string, std::string>> rest;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!taken_[i]) rest.push_back(params_[i]);
  }
  return rest;
}

absl::Status UriParams::RejectUnknown(absl::string_view scheme) const {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (taken_[i]) continue;
    const std::vector<std::string> own(asked_.begin() + scheme_options_from_,
                                       asked_.end());
    return UnknownUriOption(scheme, params_[i].first, absl::StrJoin(own, ", "));
  }
  return absl::OkStatus();
}

absl::Status UnknownUriOption(absl::string_view scheme, absl::string_view key,
                              absl::string_view known) {
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown option '", key, "' in a ", scheme, ":// URI; known options: ",
      known, known.empty() ? "" : "; on every scheme: ", kCommonOptionNames));
}

}  // namespace dlock
