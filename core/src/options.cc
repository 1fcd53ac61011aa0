#include "dlock/backend/options.h"

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/duration.h"

namespace dlock {
namespace {

constexpr absl::Duration kMinTimeout = absl::Milliseconds(1);
constexpr absl::Duration kMaxTimeout = absl::Hours(1);

bool AllDigits(absl::string_view text) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

// Takes `key` (the option itself or its alias) with the syntax of `option`.
absl::StatusOr<std::optional<absl::Duration>> TakeTimeout(
    UriParams& params, absl::string_view key, absl::string_view option) {
  const std::optional<std::string> text = params.TakeString(key);
  if (!text.has_value()) return std::optional<absl::Duration>();
  const bool whole_seconds_too = option == kConnectTimeoutOption;
  absl::StatusOr<absl::Duration> d =
      ParseDuration(*text, {.min = kMinTimeout, .max = kMaxTimeout});
  if (!d.ok() && whole_seconds_too && AllDigits(*text)) {
    int64_t seconds = 0;
    if (absl::SimpleAtoi(*text, &seconds)) d = absl::Seconds(seconds);
  }
  if (!d.ok() || *d < kMinTimeout || *d > kMaxTimeout) {
    return absl::InvalidArgumentError(absl::StrCat(
        "URI option '", key, "' must be a duration from ",
        absl::FormatDuration(kMinTimeout), " to ",
        absl::FormatDuration(kMaxTimeout), ", like 500ms, 2s or 1m",
        whole_seconds_too ? " (or whole seconds, as libpq takes it)" : "",
        ", not '", *text, "'"));
  }
  return std::optional<absl::Duration>(*d);
}

// liveness_ttl=: a duration as the timeouts take it, or "off".
absl::StatusOr<std::optional<absl::Duration>> TakeLivenessTtl(
    UriParams& params) {
  const std::optional<std::string> text = params.TakeString(kLivenessTtlOption);
  if (!text.has_value()) return std::optional<absl::Duration>();
  if (*text == "off") {
    return std::optional<absl::Duration>(absl::InfiniteDuration());
  }
  absl::StatusOr<absl::Duration> d =
      ParseDuration(*text, {.min = absl::Milliseconds(10), .max = kMaxTimeout});
  if (!d.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "URI option '", kLivenessTtlOption,
        "' must be a duration from 10ms to ", absl::FormatDuration(kMaxTimeout),
        ", like 2s or 10s, or 'off' for no liveness record, not '", *text,
        "'"));
  }
  return std::optional<absl::Duration>(*d);
}

}  // namespace

absl::StatusOr<CommonBackendOptions> TakeCommonOptions(UriParams& params) {
  CommonBackendOptions out;
  absl::StatusOr<std::optional<absl::Duration>> connect =
      TakeTimeout(params, kConnectTimeoutOption, kConnectTimeoutOption);
  if (!connect.ok()) return connect.status();
  out.connect_timeout = *connect;
  absl::StatusOr<std::optional<absl::Duration>> operation =
      TakeTimeout(params, kOperationTimeoutOption, kOperationTimeoutOption);
  if (!operation.ok()) return operation.status();
  out.operation_timeout = *operation;
  absl::StatusOr<std::optional<absl::Duration>> liveness =
      TakeLivenessTtl(params);
  if (!liveness.ok()) return liveness.status();
  out.liveness_ttl = *liveness;
  return out;
}

absl::StatusOr<std::optional<absl::Duration>> TakeAlias(
    UriParams& params, absl::string_view alias, absl::string_view option,
    std::optional<absl::Duration> value) {
  absl::StatusOr<std::optional<absl::Duration>> old =
      TakeTimeout(params, alias, option);
  if (!old.ok()) return old.status();
  if (!old->has_value()) return value;
  if (value.has_value() && *value != **old) {
    return absl::InvalidArgumentError(absl::StrCat(
        "URI options '", option, "' (", absl::FormatDuration(*value), ") and '",
        alias, "' (", absl::FormatDuration(**old),
        "), its older name, differ; give one of them"));
  }
  return *old;
}

absl::StatusOr<TlsUriOptions> TakeTlsOptions(UriParams& params,
                                             bool with_insecure_skip_verify) {
  TlsUriOptions out;
  const std::pair<const char*, std::optional<std::string>> given[] = {
      {"tls_ca", params.TakeString("tls_ca")},
      {"tls_cert", params.TakeString("tls_cert")},
      {"tls_key", params.TakeString("tls_key")},
      {"tls_server_name", params.TakeString("tls_server_name")},
      {"tls_insecure_skip_verify",
       with_insecure_skip_verify ? params.TakeString("tls_insecure_skip_verify")
                                 : std::nullopt}};
  for (const auto& [key, value] : given) {
    if (!value.has_value()) continue;
    if (value->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(key, " is empty; leave it out instead"));
    }
    if (out.first_given.empty()) out.first_given = key;
  }
  out.ca_file = given[0].second.value_or("");
  out.cert_file = given[1].second.value_or("");
  out.key_file = given[2].second.value_or("");
  out.server_name = given[3].second.value_or("");
  if (const std::optional<std::string>& flag = given[4].second) {
    if (*flag != "true" && *flag != "false") {
      return absl::InvalidArgumentError(absl::StrCat(
          "tls_insecure_skip_verify must be true or false, not '", *flag, "'"));
    }
    out.insecure_skip_verify = *flag == "true";
  }
  if (out.cert_file.empty() != out.key_file.empty()) {
    return absl::InvalidArgumentError(
        "tls_cert and tls_key go together: give both, or neither");
  }
  return out;
}

}  // namespace dlock
