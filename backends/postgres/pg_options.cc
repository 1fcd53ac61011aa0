#include "pg_options.h"

#include <libpq-fe.h>

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dlock::postgres {
namespace {

constexpr size_t kMaxTableBytes = 40;  // suffixes must fit in 63 bytes
constexpr absl::Duration kMinGrace = absl::Milliseconds(100);
constexpr absl::Duration kMaxGrace = absl::Minutes(10);
constexpr absl::Duration kDefaultConnectTimeout = absl::Seconds(5);
constexpr char kKnownOptions[] =
    "table, mode (lease|session), pool_size, max_sessions, session_grace, "
    "statement_timeout (the older name of operation_timeout), grant_to, "
    "listen_dbname, "
    "libpq connection parameters (sslmode, application_name, options, ...)";

// Keywords this libpq accepts, as PQconndefaults() lists them.
absl::flat_hash_set<std::string> LibpqKeywords() {
  absl::flat_hash_set<std::string> out;
  PQconninfoOption* defaults = PQconndefaults();
  if (defaults == nullptr) return out;
  for (PQconninfoOption* o = defaults; o->keyword != nullptr; ++o) {
    out.insert(o->keyword);
  }
  PQconninfoFree(defaults);
  return out;
}

// Where messages say we connect: host:port pairs, never user or password.
std::string Endpoint(const Uri& uri, const std::string& host_param,
                     const std::string& port_param) {
  std::vector<std::string> parts;
  for (const HostPort& hp : uri.hosts) {
    std::string host = hp.host.find(':') != std::string::npos
                           ? absl::StrCat("[", hp.host, "]")
                           : hp.host;
    parts.push_back(absl::StrCat(
        host, ":", hp.port.has_value() ? absl::StrCat(*hp.port) : "5432"));
  }
  if (parts.empty()) {
    parts.push_back(absl::StrCat(host_param.empty() ? "localhost" : host_param,
                                 ":",
                                 port_param.empty() ? "5432" : port_param));
  }
  return absl::StrCat("postgres at ", absl::StrJoin(parts, ","));
}

// libpq's connect_timeout is whole seconds, and 0 would wait forever:
// rounded up, at least 1 (libpq itself waits at least 2).
std::string LibpqConnectTimeout(absl::Duration timeout) {
  const int64_t seconds =
      absl::ToInt64Seconds(absl::Ceil(timeout, absl::Seconds(1)));
  return absl::StrCat(std::max<int64_t>(seconds, 1));
}

}  // namespace

absl::Status ValidateTableName(absl::string_view table) {
  bool ok = !table.empty() && table.size() <= kMaxTableBytes &&
            !(table[0] >= '0' && table[0] <= '9');
  for (char c : table) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("URI option 'table' must be a lower-case SQL identifier "
                   "([a-z_][a-z0-9_]*, at most ",
                   kMaxTableBytes, " bytes), not '", table, "'"));
}

absl::StatusOr<PgOptions> ParsePgOptions(const BackendConfig& config) {
  const Uri& uri = config.uri;
  UriParams& params = config.params;
  PgOptions out;

  if (std::optional<std::string> table = params.TakeString("table")) {
    if (absl::Status s = ValidateTableName(*table); !s.ok()) return s;
    out.table = *table;
  }
  if (std::optional<std::string> mode = params.TakeString("mode")) {
    if (*mode == "lease") {
      out.mode = Mode::kLease;
    } else if (*mode == "session") {
      out.mode = Mode::kSession;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "URI option 'mode' must be 'lease' or 'session', not '", *mode, "'"));
    }
  }
  if (std::optional<std::string> role = params.TakeString("grant_to")) {
    if (role->empty()) {
      return absl::InvalidArgumentError("URI option 'grant_to' needs a role");
    }
    out.grant_to = *role;
  }
  if (std::optional<std::string> db = params.TakeString("listen_dbname")) {
    out.listen_dbname = *db;
  }
  absl::StatusOr<std::optional<int64_t>> pool =
      params.TakeInt("pool_size", 1, 256);
  if (!pool.ok()) return pool.status();
  if (pool->has_value()) out.pool_size = static_cast<int>(**pool);
  absl::StatusOr<std::optional<int64_t>> sessions =
      params.TakeInt("max_sessions", 1, 10000);
  if (!sessions.ok()) return sessions.status();
  if (sessions->has_value()) out.max_sessions = static_cast<int>(**sessions);
  // The common operation timeout, or statement_timeout, its older name here.
  absl::StatusOr<std::optional<absl::Duration>> timeout =
      TakeAlias(params, "statement_timeout", kOperationTimeoutOption,
                config.common.operation_timeout);
  if (!timeout.ok()) return timeout.status();
  if (timeout->has_value()) {
    // The sweeper deletes rows idle for 10 minutes; a statement must never
    // outlive that (docs/postgres.md, fencing).
    if (**timeout < absl::Milliseconds(10) || **timeout > absl::Minutes(1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "URI option 'operation_timeout' (or 'statement_timeout') must be "
          "from 10ms to 1m on postgres, not ",
          absl::FormatDuration(**timeout)));
    }
    out.statement_timeout = **timeout;
  }

  absl::StatusOr<std::optional<absl::Duration>> grace =
      params.TakeDuration("session_grace");
  if (!grace.ok()) return grace.status();
  const absl::Duration lease = config.options.watchdog_lease;
  if (grace->has_value()) {
    const absl::Duration g = **grace;
    if (out.mode != Mode::kSession) {
      return absl::InvalidArgumentError(
          "URI option 'session_grace' applies to mode=session only");
    }
    // At least a few heartbeats (one every third of it) per grace, and
    // shorter than the watchdog's lease: a grace at least as long as the
    // lease would never free a dead holder's lock sooner than the lease.
    if (g < kMinGrace || g > kMaxGrace || g >= lease) {
      return absl::InvalidArgumentError(absl::StrCat(
          "URI option 'session_grace' must be from ",
          absl::FormatDuration(kMinGrace), " to ",
          absl::FormatDuration(kMaxGrace),
          " and shorter than the watchdog lease (", absl::FormatDuration(lease),
          "), not ", absl::FormatDuration(g)));
    }
    out.session_grace = g;
  } else if (lease < out.session_grace) {
    // A short watchdog lease: its holds end with their lease first anyway;
    // heartbeats as often as the watchdog renews are enough.
    out.session_grace = std::max(lease, kMinGrace);
  }

  // The URI's own parts, with libpq's meaning.
  auto add = [&out](absl::string_view k, absl::string_view v) {
    out.keywords.emplace_back(k);
    out.values.emplace_back(v);
  };
  std::vector<std::string> hosts, ports;
  bool any_port = false;
  for (const HostPort& hp : uri.hosts) {
    hosts.push_back(hp.host);
    ports.push_back(hp.port.has_value() ? absl::StrCat(*hp.port) : "");
    any_port = any_port || hp.port.has_value();
  }
  absl::flat_hash_set<std::string> from_uri;
  if (!hosts.empty()) {
    add("host", absl::StrJoin(hosts, ","));
    from_uri.insert("host");
    if (any_port) {
      add("port", absl::StrJoin(ports, ","));
      from_uri.insert("port");
    }
  }
  if (!uri.user.empty()) {
    add("user", uri.user);
    from_uri.insert("user");
  }
  if (uri.password.has_value()) {
    add("password", *uri.password);
    from_uri.insert("password");
  }
  if (!uri.path.empty()) {
    add("dbname", uri.path);
    from_uri.insert("dbname");
  }

  // Everything else goes to libpq if libpq knows it.
  const absl::flat_hash_set<std::string> known = LibpqKeywords();
  std::string host_param, port_param;
  bool has_application_name = false;
  bool has_session_attrs = false;
  for (const auto& [key, value] : params.Rest()) {
    if (!known.contains(key) || key == "replication") {
      return UnknownUriOption(uri.scheme, key, kKnownOptions);
    }
    if (from_uri.contains(key)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "option '", key, "' is given both in the URI and as a parameter"));
    }
    if (key == "host") host_param = value;
    if (key == "port") port_param = value;
    has_application_name = has_application_name || key == "application_name";
    has_session_attrs = has_session_attrs || key == "target_session_attrs";
    add(key, value);
  }
  // The common connect timeout, which the core took (libpq's name too).
  // Connecting must not hang either: libpq's default is to wait forever.
  add("connect_timeout",
      LibpqConnectTimeout(
          config.common.connect_timeout.value_or(kDefaultConnectTimeout)));
  if (!has_application_name) add("application_name", "dlock");
  // Several hosts: a primary and its standbys. dlock writes on every call,
  // so it wants the primary, wherever it is now (libpq's default takes the
  // first host that answers, standby or not).
  if (!has_session_attrs &&
      (uri.hosts.size() > 1 || host_param.find(',') != std::string::npos)) {
    add("target_session_attrs", "read-write");
  }
  out.endpoint = Endpoint(uri, host_param, port_param);
  return out;
}

PgOptions WithDbname(const PgOptions& options, const std::string& dbname) {
  PgOptions out = options;
  for (size_t i = 0; i < out.keywords.size(); ++i) {
    if (out.keywords[i] == "dbname") {
      out.values[i] = dbname;
      return out;
    }
  }
  out.keywords.push_back("dbname");
  out.values.push_back(dbname);
  return out;
}

}  // namespace dlock::postgres
