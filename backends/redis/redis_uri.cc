#include "redis_uri.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/backend/options.h"
#include "redis_tls.h"

namespace dlock::redis {

bool IsTlsScheme(absl::string_view scheme) {
  return scheme == "rediss" || scheme == "rediss-sentinel" ||
         scheme == "rediss-cluster" || scheme == "redlocks";
}

namespace {

// The tls_* options: a context for a TLS scheme, none for a plaintext one
// (which must not be given them: a URI that asks for a CA but goes out in
// plaintext is a mistake to report, not to ignore).
absl::StatusOr<TlsSettings> ParseTls(const Uri& uri, UriParams& params) {
  absl::StatusOr<TlsUriOptions> given =
      TakeTlsOptions(params, /*with_insecure_skip_verify=*/true);
  if (!given.ok()) return given.status();
  TlsSettings settings;
  if (!IsTlsScheme(uri.scheme)) {
    if (given->first_given.empty()) return settings;
    return absl::InvalidArgumentError(
        absl::StrCat(given->first_given,
                     " is an option of the TLS schemes (rediss://, "
                     "rediss-sentinel://, rediss-cluster://, "
                     "redlocks://), not of ",
                     uri.scheme, "://"));
  }
  settings.server_name = given->server_name;
  absl::StatusOr<std::shared_ptr<const TlsContext>> context =
      TlsContext::Create(
          TlsOptions{.ca_file = given->ca_file,
                     .cert_file = given->cert_file,
                     .key_file = given->key_file,
                     .insecure_skip_verify = given->insecure_skip_verify});
  if (!context.ok()) return context.status();
  settings.context = *std::move(context);
  return settings;
}

}  // namespace
absl::Status CheckHostCount(const Uri& uri, absl::string_view form,
                            size_t min_hosts, size_t max_hosts) {
  if (uri.hosts.size() >= min_hosts && uri.hosts.size() <= max_hosts) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("a ", uri.scheme, " URI names ",
                   min_hosts == max_hosts
                       ? (min_hosts == 1 ? std::string("one host")
                                         : absl::StrCat(min_hosts, " hosts"))
                       : absl::StrCat(min_hosts, " to ", max_hosts, " hosts"),
                   ", not ", uri.hosts.size(), ": ", form));
}

absl::StatusOr<std::vector<ConnectionConfig>> ParseHosts(
    const BackendConfig& config, absl::string_view form,
    absl::Duration default_timeout) {
  const Uri& uri = config.uri;
  ConnectionConfig common;
  common.user = uri.user;
  common.password = uri.password.value_or("");
  if (!common.user.empty() && common.password.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a ", uri.scheme, " URI with a user needs a password: ", form));
  }
  if (!uri.path.empty() && (!absl::SimpleAtoi(uri.path, &common.db) ||
                            common.db < 0 || common.db > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the redis db in the URI path must be a number, not '", uri.path, "'"));
  }
  // The common options: the dial, and every read or write of a command.
  common.connect_timeout =
      config.common.connect_timeout.value_or(default_timeout);
  absl::StatusOr<std::optional<absl::Duration>> command_timeout =
      TakeAlias(config.params, "command_timeout", kOperationTimeoutOption,
                config.common.operation_timeout);
  if (!command_timeout.ok()) return command_timeout.status();
  common.command_timeout = command_timeout->value_or(default_timeout);
  absl::StatusOr<TlsSettings> tls = ParseTls(uri, config.params);
  if (!tls.ok()) return tls.status();
  common.tls = *std::move(tls);
  std::vector<ConnectionConfig> out;
  for (const HostPort& host : uri.hosts) {
    ConnectionConfig c = common;
    c.host = host.host.empty() ? "127.0.0.1" : host.host;
    c.port = host.port.value_or(6379);
    c.endpoint = absl::StrCat(c.host, ":", c.port);
    for (const ConnectionConfig& earlier : out) {
      if (absl::EqualsIgnoreCase(earlier.endpoint, c.endpoint)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the URI names ", c.endpoint,
            " twice; each host must be a separate server: ", form));
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace dlock::redis
