// etcd://host:port[,host:port...][?namespace=...&connect_timeout=...
//     &operation_timeout=...&tls_ca=...&tls_cert=...&tls_key=...
//     &tls_server_name=...]
// etcds://... : TLS with the system's CAs unless tls_ca names others.
// The user and password of etcd's authentication are the user info
// (etcd://user:password@...), where a profile's password_env or
// password_file puts the password. The URI's parsing and the registration
// of the schemes.
#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/options.h"
#include "etcd_backend.h"

namespace dlock::etcd {
namespace {

constexpr uint16_t kDefaultPort = 2379;
constexpr absl::string_view kUsage =
    "etcd://[user:password@]host:port[,host:port...][?namespace=...&"
    "connect_timeout=...&operation_timeout=...&tls_ca=...&tls_cert=...&"
    "tls_key=...&tls_server_name=...]";

absl::Status TakeEndpoints(const Uri& uri, ClientOptions& options) {
  if (uri.hosts.empty() || !uri.path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an etcd URI names one member or more and no path: ", kUsage));
  }
  for (const HostPort& hp : uri.hosts) {
    if (hp.host.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("an etcd URI has an empty host name: ", kUsage));
    }
    options.endpoints.push_back(DialAddress(hp, kDefaultPort));
  }
  return absl::OkStatus();
}

// TLS when the scheme says so or any tls_* option is given; the options of
// rediss:// (dlock/backend/options.h), but for tls_insecure_skip_verify:
// gRPC always checks the server.
absl::Status TakeTls(const Uri& uri, UriParams& params,
                     ClientOptions& options) {
  absl::StatusOr<TlsUriOptions> given =
      TakeTlsOptions(params, /*with_insecure_skip_verify=*/false);
  if (!given.ok()) return given.status();
  options.tls = uri.scheme == "etcds" || !given->first_given.empty();
  options.tls_ca = given->ca_file;
  options.tls_cert = given->cert_file;
  options.tls_key = given->key_file;
  options.tls_server_name = given->server_name;
  return absl::OkStatus();
}

absl::Status TakeCredentials(const Uri& uri, ClientOptions& options) {
  if (uri.user.empty() && !uri.password.has_value()) return absl::OkStatus();
  if (uri.user.empty() || !uri.password.has_value()) {
    return absl::InvalidArgumentError(
        "etcd's authentication needs a user and its password: "
        "etcd://user:password@..., or the user with the password from a "
        "profile's password_env or password_file");
  }
  options.user = uri.user;
  options.password = *uri.password;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Backend>> MakeEtcdBackend(
    const BackendConfig& config) {
  ClientOptions client;
  if (absl::Status s = TakeEndpoints(config.uri, client); !s.ok()) return s;
  if (absl::Status s = TakeTls(config.uri, config.params, client); !s.ok()) {
    return s;
  }
  if (absl::Status s = TakeCredentials(config.uri, client); !s.ok()) return s;
  if (absl::Status s = config.params.RejectUnknown(config.uri.scheme);
      !s.ok()) {
    return s;
  }
  // connect_timeout: the wait for one member's connection before the next
  // is tried. operation_timeout: how long one request waits for one
  // member's answer; a call may try every member (and one twice) in turn.
  if (config.common.connect_timeout.has_value()) {
    client.connect_timeout = *config.common.connect_timeout;
  }
  if (config.common.operation_timeout.has_value()) {
    const absl::Duration each = *config.common.operation_timeout;
    client.attempt_timeout = each;
    client.call_timeout = each * static_cast<int64_t>(std::max<size_t>(
                                     2, client.endpoints.size() + 1));
  }
  return EtcdBackend::Create(
      BackendSettings{.client = std::move(client),
                      .lock_namespace = config.lock_namespace,
                      .fallback_poll = config.options.fallback_poll,
                      .clock = &config.clock,
                      .liveness_id = config.liveness_id,
                      .liveness_ttl = config.options.liveness_ttl});
}

const bool kRegistered = RegisterBackend("etcd", &MakeEtcdBackend) &&
                         RegisterBackend("etcds", &MakeEtcdBackend) &&
                         RegisterClientLibrary("gRPC", grpc::Version());

}  // namespace
}  // namespace dlock::etcd
