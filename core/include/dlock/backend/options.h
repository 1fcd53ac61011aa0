// Copyright dlock authors. The URI options that mean the same on every
// backend, parsed once by the core and handed to the backend's factory in
// BackendConfig::common; each backend maps them onto its own client
// (docs/backends.md, "Options every backend takes"). The lease is not one of
// them: it is ClientOptions::watchdog_lease, or AcquireOptions::lease.
#ifndef DLOCK_BACKEND_OPTIONS_H_
#define DLOCK_BACKEND_OPTIONS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/uri.h"

namespace dlock {

inline constexpr char kConnectTimeoutOption[] = "connect_timeout";
inline constexpr char kOperationTimeoutOption[] = "operation_timeout";
inline constexpr char kLivenessTtlOption[] = "liveness_ttl";
// For "known options" lists: what every scheme takes besides its own.
inline constexpr char kCommonOptionNames[] =
    "namespace, connect_timeout, operation_timeout, liveness_ttl";

struct CommonBackendOptions {
  // connect_timeout=: how long to wait for a connection (or a session) to be
  // set up, from the first packet to the first answer. Unset: the backend's
  // default.
  std::optional<absl::Duration> connect_timeout;
  // operation_timeout=: how long one request waits for the server's answer
  // before the call gives up with Unavailable. Unset: the backend's default.
  std::optional<absl::Duration> operation_timeout;
  // liveness_ttl=: ClientOptions::liveness_ttl from the URI (which wins);
  // "off" disables liveness (InfiniteDuration). Connect() applies it to the
  // options the core and the backend get.
  std::optional<absl::Duration> liveness_ttl;
};

// Takes connect_timeout, operation_timeout and liveness_ttl from `params`.
// Each is a duration with a unit (500ms, 2s, 1.5s, 1m) from 1ms to 1h;
// connect_timeout also takes a whole number of seconds, as libpq writes it;
// liveness_ttl also takes "off" and must be at least 10ms. InvalidArgument
// naming the option and the form otherwise.
absl::StatusOr<CommonBackendOptions> TakeCommonOptions(UriParams& params);

// For a backend that had its own name for a common option before there was
// one (Redis command_timeout, PostgreSQL statement_timeout): takes `alias`
// from `params`, with the syntax of `option`, and returns the value given
// under either name (`value` is what the core took for `option`).
// InvalidArgument when both are given and differ.
absl::StatusOr<std::optional<absl::Duration>> TakeAlias(
    UriParams& params, absl::string_view alias, absl::string_view option,
    std::optional<absl::Duration> value);

// The tls_* options, with one set of names and rules on every scheme that
// speaks TLS (rediss://, etcds://, ...).
struct TlsUriOptions {
  std::string ca_file;      // tls_ca: PEM CAs to trust; empty: the system's
  std::string cert_file;    // tls_cert: the client's certificate, PEM
  std::string key_file;     // tls_key: its private key, PEM
  std::string server_name;  // tls_server_name: what the server's
                            // certificate must name; empty: the host
  // tls_insecure_skip_verify=true: the server's certificate unchecked.
  bool insecure_skip_verify = false;
  // The first tls_* option the URI gave; empty when it gave none.
  std::string first_given;
};

// Takes the tls_* options from `params`; tls_insecure_skip_verify only when
// `with_insecure_skip_verify` (elsewhere RejectUnknown names it).
// InvalidArgument for an empty value, a tls_insecure_skip_verify other than
// true or false, and one of tls_cert and tls_key without the other.
absl::StatusOr<TlsUriOptions> TakeTlsOptions(UriParams& params,
                                             bool with_insecure_skip_verify);

}  // namespace dlock

#endif  // DLOCK_BACKEND_OPTIONS_H_
