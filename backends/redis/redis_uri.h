// Copyright dlock authors. What every Redis URI shares: credentials, db and
// timeouts for each host it names.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_URI_H_
#define DLOCK_BACKENDS_REDIS_REDIS_URI_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dlock/backend/backend.h"
#include "redis_connection.h"

namespace dlock::redis {

// One ConnectionConfig per host of `config.uri`, in order, with the URI's
// user, password, db (its path), the common timeouts and, for a TLS scheme,
// the tls_* options (one TLS context shared by every host); takes the
// legacy command_timeout= parameter. Timeouts not set are `default_timeout`.
// `form` is the URI form for messages
// ("redis://[user[:password]@]host[:port][/db]"). InvalidArgument when a
// part is malformed.
absl::StatusOr<std::vector<ConnectionConfig>> ParseHosts(
    const BackendConfig& config, absl::string_view form,
    absl::Duration default_timeout = absl::Seconds(2));

// rediss://, rediss-sentinel://, rediss-cluster:// and redlocks://: the TLS
// forms of redis://, redis-sentinel://, redis-cluster:// and redlock://
// (every server, Sentinels included, over TLS). The `s` is the one rediss://
// (redis-py, Lettuce, ioredis) and https:// add.
bool IsTlsScheme(absl::string_view scheme);

// InvalidArgument when the URI names fewer than `min_hosts` or more than
// `max_hosts` hosts. Checked after the options, so that a misspelt option
// is reported as such whatever else is wrong.
absl::Status CheckHostCount(const Uri& uri, absl::string_view form,
                            size_t min_hosts, size_t max_hosts);

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_URI_H_
