// zk://host:port[,host:port...][/chroot][?namespace=...&session_timeout=...
//     &kept_sweep=...&connect_timeout=...&operation_timeout=...
//     &auth=digest:USER[:PASSWORD]]
// The URI's parsing and the registration of the scheme.
#include <zookeeper/zookeeper_version.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "dlock/backend/backend.h"
#include "zk_backend.h"

namespace dlock::zk {
namespace {

constexpr uint16_t kDefaultPort = 2181;
constexpr absl::Duration kDefaultSessionTimeout = absl::Seconds(10);
constexpr absl::Duration kDefaultKeptSweep = absl::Minutes(10);
constexpr absl::Duration kDefaultConnectTimeout = absl::Seconds(5);
constexpr absl::string_view kUsage =
    "zk://host:port[,host:port...][/chroot][?namespace=...&session_timeout="
    "...&kept_sweep=...&connect_timeout=...&operation_timeout=...&auth=digest:"
    "USER[:PASSWORD]]";

absl::StatusOr<std::string> HostList(const Uri& uri) {
  if (uri.hosts.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a zk URI names at least one server: ", kUsage));
  }
  std::vector<std::string> hosts;
  for (const HostPort& hp : uri.hosts) {
    if (hp.host.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a zk URI has an empty host name: ", kUsage));
    }
    hosts.push_back(DialAddress(hp, kDefaultPort));
  }
  return absl::StrJoin(hosts, ",");
}

absl::StatusOr<std::string> Chroot(const Uri& uri) {
  std::string chroot;
  for (absl::string_view part :
       absl::StrSplit(uri.path, '/', absl::SkipEmpty())) {
    bool bad = part == "." || part == "..";
    for (unsigned char c : part) bad = bad || c < 0x20 || c == 0x7F;
    if (bad) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the chroot of a zk URI has an invalid component '", part, "'"));
    }
    absl::StrAppend(&chroot, "/", part);
  }
  return chroot;
}

// The digest credential, "USER:PASSWORD" as ZooKeeper's digest scheme takes
// it: from auth=digest:USER:PASSWORD, or from auth=digest:USER and a
// password-only user info (":PASSWORD@"), which is where a profile's
// password_env or password_file puts it. Messages never repeat the values.
absl::StatusOr<std::string> Digest(const Uri& uri, UriParams& params) {
  constexpr absl::string_view kForms =
      "auth=digest:USER:PASSWORD, or auth=digest:USER with the password from "
      "a profile's password_env or password_file";
  if (!uri.user.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a zk URI names its user in ", kForms,
                     ", not before '@' (nor as a profile's username)"));
  }
  std::optional<std::string> auth = params.TakeString("auth");
  if (!auth.has_value()) {
    if (!uri.password.has_value()) return std::string();
    return absl::InvalidArgumentError(absl::StrCat(
        "a zk URI with a password needs the user it belongs to: ", kForms));
  }
  absl::string_view rest(*auth);
  if (!absl::ConsumePrefix(&rest, "digest:") || rest.empty() ||
      rest.front() == ':') {
    return absl::InvalidArgumentError(
        absl::StrCat("URI option 'auth' must look like ", kForms,
                     " (digest is the only scheme)"));
  }
  const bool has_password = absl::StrContains(rest, ':');
  if (has_password == uri.password.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(has_password ? "a zk URI gives its password once: "
                                  : "auth=digest:USER needs a password: ",
                     kForms));
  }
  return has_password ? std::string(rest)
                      : absl::StrCat(rest, ":", *uri.password);
}

absl::StatusOr<std::unique_ptr<Backend>> MakeZooKeeperBackend(
    const BackendConfig& config) {
  absl::StatusOr<std::string> hosts = HostList(config.uri);
  if (!hosts.ok()) return hosts.status();
  absl::StatusOr<std::string> chroot = Chroot(config.uri);
  if (!chroot.ok()) return chroot.status();
  absl::StatusOr<std::optional<absl::Duration>> session_timeout =
      config.params.TakeDuration("session_timeout");
  if (!session_timeout.ok()) return session_timeout.status();
  absl::StatusOr<std::optional<absl::Duration>> kept_sweep =
      config.params.TakeDuration("kept_sweep");
  if (!kept_sweep.ok()) return kept_sweep.status();
  absl::StatusOr<std::string> digest = Digest(config.uri, config.params);
  if (!digest.ok()) return digest.status();
  if (absl::Status s = config.params.RejectUnknown("zk"); !s.ok()) {
    return s;
  }
  const absl::Duration session =
      session_timeout->value_or(kDefaultSessionTimeout);
  if (session < absl::Milliseconds(100) || session > absl::Hours(1)) {
    return absl::InvalidArgumentError(
        "URI option 'session_timeout' must be from 100ms to 1h");
  }
  const absl::Duration sweep = kept_sweep->value_or(kDefaultKeptSweep);
  if (sweep < absl::Seconds(1) || sweep > absl::Hours(24)) {
    return absl::InvalidArgumentError(
        "URI option 'kept_sweep' must be from 1s to 24h");
  }
  // The common options: the wait for a session, and for each call's reply
  // (by default as long as the session may live without one).
  return ZkBackend::Create(BackendSettings{
      .session = {.hosts = *std::move(hosts),
                  .session_timeout = session,
                  .connect_timeout = config.common.connect_timeout.value_or(
                      kDefaultConnectTimeout),
                  .operation_timeout =
                      config.common.operation_timeout.value_or(session),
                  .digest = *std::move(digest),
                  .endpoint = config.endpoint},
      .chroot = *std::move(chroot),
      .lock_namespace = config.lock_namespace,
      .client_id = config.client_id,
      .fallback_poll = config.options.fallback_poll,
      .kept_sweep = sweep,
      .listener = config.listener,
      .clock = &config.clock});
}

const bool kRegistered =
    RegisterBackend("zk", &MakeZooKeeperBackend) &&
    RegisterClientLibrary("ZooKeeper C client", ZOO_VERSION);

}  // namespace
}  // namespace dlock::zk
