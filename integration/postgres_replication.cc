#include "postgres_replication.h"

#include "absl/strings/str_cat.h"
#include "server_process.h"

namespace dlock::test {
namespace {

constexpr char kSlot[] = "dlock_standby";

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresReplication>> PostgresReplication::Start(
    Options options) {
  std::unique_ptr<PostgresReplication> pair(new PostgresReplication);
  pair->synchronous_ = options.synchronous;
  absl::StatusOr<std::unique_ptr<PostgresServer>> primary =
      PostgresServer::Start(std::move(options.server));
  if (!primary.ok()) return primary.status();
  pair->servers_[0] = *std::move(primary);
  if (absl::Status s = pair->link_.Start("127.0.0.1", pair->primary().port());
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<PostgresServer>> standby =
      PostgresServer::StartStandby(pair->primary(), kSlot, pair->link_.port());
  if (!standby.ok()) return standby.status();
  pair->servers_[1] = *std::move(standby);
  if (absl::Status s = pair->Stream(); !s.ok()) return s;
  return pair;
}

std::string PostgresReplication::Uri(const std::string& ns,
                                     const std::string& extra) const {
  std::string uri =
      absl::StrCat("postgres://postgres@127.0.0.1:", servers_[0]->port(),
                   ",127.0.0.1:", servers_[1]->port(),
                   "/postgres?target_session_attrs=read-write");
  if (!ns.empty()) absl::StrAppend(&uri, "&namespace=", ns);
  if (!extra.empty()) absl::StrAppend(&uri, "&", extra);
  return uri;
}

absl::Status PostgresReplication::SetSynchronous(bool synchronous) {
  synchronous_ = synchronous;
  return Stream();
}

absl::Status PostgresReplication::Stream() {
  // The standby's walreceiver is named after its slot (application_name).
  const std::string streaming = absl::StrCat(
      "SELECT count(*) FROM pg_stat_replication WHERE application_name = '",
      kSlot, "' AND state = 'streaming' AND sync_state = '",
      synchronous_ ? "sync" : "async", "';");
  absl::StatusOr<std::string> set = primary().Psql(
      absl::StrCat("ALTER SYSTEM SET synchronous_standby_names = '",
                   synchronous_ ? "*" : "", "';\nSELECT pg_reload_conf();"));
  if (!set.ok()) return set.status();
  absl::Status last;
  absl::Status waited = WaitUntil(
      [&] {
        absl::StatusOr<std::string> n = primary().Psql(streaming);
        last = n.status();
        return n.ok() && *n == "1";
      },
      absl::Seconds(60),
      absl::StrCat("the standby on port ", standby().port(),
                   synchronous_ ? " streaming synchronously" : " streaming",
                   " from the primary on port ", primary().port()));
  if (!waited.ok() && !last.ok()) {
    return absl::Status(waited.code(),
                        absl::StrCat(waited.message(), "; ", last.message()));
  }
  return waited;
}

absl::Status PostgresReplication::WaitReplayed(absl::Duration timeout) {
  absl::StatusOr<std::string> lsn =
      primary().Psql("SELECT pg_current_wal_lsn();");
  if (!lsn.ok()) return lsn.status();
  const std::string replayed =
      absl::StrCat("SELECT pg_last_wal_replay_lsn() >= '", *lsn, "'::pg_lsn;");
  return WaitUntil(
      [&] {
        absl::StatusOr<std::string> done = standby().Psql(replayed);
        return done.ok() && *done == "t";
      },
      timeout,
      absl::StrCat("the standby replaying the primary's WAL to ", *lsn));
}

void PostgresReplication::KillPrimary() { primary().Kill(); }

absl::Status PostgresReplication::Promote() {
  if (absl::Status s = standby().Promote(); !s.ok()) return s;
  primary_ = 1 - primary_;
  return absl::OkStatus();
}

absl::Status PostgresReplication::Rebuild() {
  if (absl::Status s = link_.SetUpstream("127.0.0.1", primary().port());
      !s.ok()) {
    return s;
  }
  link_.ResetAll();  // the old stream, if the old standby still had one
  if (absl::Status s =
          standby().RebuildAsStandbyOf(primary(), kSlot, link_.port());
      !s.ok()) {
    return s;
  }
  return Stream();
}

}  // namespace dlock::test
