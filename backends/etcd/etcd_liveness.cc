#include "etcd_liveness.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "etcd_layout.h"
#include "etcd_leases.h"

namespace dlock::etcd {
namespace {

// etcd refuses a transaction of more operations than --max-txn-ops (128 by
// default).
constexpr size_t kReadsPerTxn = 64;

}  // namespace

ClientLiveness::ClientLiveness(Client& client, WakeupHub& hub,
                               const Clock& clock, std::string liveness_id,
                               absl::Duration ttl, absl::Duration recheck)
    : client_(client),
      hub_(hub),
      clock_(clock),
      liveness_id_(std::move(liveness_id)),
      ttl_(ttl),
      recheck_(recheck) {}

ClientLiveness::~ClientLiveness() { Shutdown(); }

absl::StatusOr<std::optional<ClientLiveness::Record>>
ClientLiveness::ForGrant() {
  if (off()) return std::nullopt;
  auto fresh = [&]() -> std::optional<Record> {
    absl::MutexLock lock(&mu_);
    if (!current_.has_value()) return std::nullopt;
    const MonoTime confirmed =
        current_->lease.alive_until - current_->lease.ttl;
    if (clock_.Now() >= confirmed + ttl_ / 2) return std::nullopt;
    return Record{.id = current_->id, .confirmed = confirmed};
  };
  if (std::optional<Record> record = fresh()) return record;
  absl::MutexLock begin(&begin_mu_);
  if (std::optional<Record> record = fresh()) return record;  // by another
  std::optional<Current> current;
  {
    absl::MutexLock lock(&mu_);
    current = current_;
  }
  if (current.has_value()) {
    absl::StatusOr<MonoTime> kept =
        KeepAlive(*current, client_.options().call_timeout);
    if (kept.ok()) return Record{.id = current->id, .confirmed = *kept};
    if (!absl::IsNotFound(kept.status())) return kept.status();
  }
  return Begin();
}

absl::StatusOr<ClientLiveness::Record> ClientLiveness::Begin() {
  std::string id;
  {
    absl::MutexLock lock(&mu_);
    id = absl::StrCat(liveness_id_, ".", ++generation_);
  }
  absl::StatusOr<LeaseState> lease = GrantLease(client_, clock_, ttl_);
  if (!lease.ok()) return lease.status();
  etcdserverpb::PutRequest put;
  put.set_key(LivenessKey(id));
  put.set_lease(lease->id);
  // The key is this generation's alone: a retried put writes it again.
  absl::StatusOr<etcdserverpb::PutResponse> written =
      client_.Put(put, {.idempotent = true});
  if (!written.ok()) {
    (void)client_.LeaseRevoke(lease->id);  // or it expires by itself
    return written.status();
  }
  absl::MutexLock lock(&mu_);
  current_ = Current{.id = id, .lease = *lease};
  return Record{.id = id, .confirmed = lease->alive_until - lease->ttl};
}

absl::StatusOr<MonoTime> ClientLiveness::KeepAlive(const Current& current,
                                                   absl::Duration within) {
  absl::StatusOr<LeaseState> kept = KeepLeaseAlive(
      client_, clock_, current.lease.id, MonotonicNow() + within);
  absl::MutexLock lock(&mu_);
  const bool still = current_.has_value() && current_->id == current.id;
  if (!kept.ok()) {
    if (absl::IsNotFound(kept.status()) && still) current_.reset();
    return kept.status();
  }
  if (still && kept->alive_until > current_->lease.alive_until) {
    current_->lease = *kept;
  }
  return kept->alive_until - kept->ttl;
}

MonoTime ClientLiveness::CountsFrom(const std::optional<Record>& record,
                                    MonoTime sent, absl::Duration slack) {
  if (!record.has_value()) return MonoTime::InfiniteFuture();
  if (record->confirmed >= sent - slack) return record->confirmed;
  std::optional<Current> current;
  {
    absl::MutexLock lock(&mu_);
    if (current_.has_value() && current_->id == record->id) current = current_;
  }
  if (!current.has_value()) return record->confirmed;
  // Sent after the grant: the key outlives `sent` plus the TTL.
  absl::StatusOr<MonoTime> kept =
      KeepAlive(*current, client_.options().attempt_timeout);
  return kept.ok() ? sent : record->confirmed;
}

absl::Status ClientLiveness::Renew(absl::Duration ttl) {
  std::optional<Current> current;
  {
    absl::MutexLock lock(&mu_);
    current = current_;
  }
  if (!current.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "etcd ", absl::StrJoin(client_.options().endpoints, ","),
        ": this client's liveness key lapsed (etcd ended its lease), so its "
        "holds are free to take over; the next grant begins another"));
  }
  // A keepalive answered after the TTL would confirm nothing.
  return KeepAlive(*current, std::min(ttl, client_.options().call_timeout))
      .status();
}

absl::StatusOr<absl::flat_hash_set<std::string>> ClientLiveness::LiveAmong(
    const std::vector<std::string>& ids) {
  absl::flat_hash_set<std::string> live;
  for (size_t from = 0; from < ids.size(); from += kReadsPerTxn) {
    const size_t to = std::min(ids.size(), from + kReadsPerTxn);
    etcdserverpb::TxnRequest txn;
    for (size_t i = from; i < to; ++i) {
      etcdserverpb::RequestOp read = RangeOp(LivenessKey(ids[i]));
      read.mutable_request_range()->set_count_only(true);
      *txn.add_success() = std::move(read);
    }
    // Reads only: nothing to apply twice.
    absl::StatusOr<etcdserverpb::TxnResponse> response =
        client_.Txn(txn, {.idempotent = true});
    if (!response.ok()) return response.status();
    for (size_t i = from; i < to; ++i) {
      const int n = static_cast<int>(i - from);
      if (n < response->responses_size() &&
          response->responses(n).response_range().count() > 0) {
        live.insert(ids[i]);
      }
    }
  }
  return live;
}

void ClientLiveness::WakeWhenGone(absl::string_view name,
                                  const std::vector<std::string>& ids,
                                  int64_t from_revision) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  for (const std::string& id : ids) waits_[id].insert(std::string(name));
  if (watch_ != nullptr) return;
  // Waiters that registered before this one and read at an older revision
  // may miss a deletion in between: their fallback poll finds it.
  watch_ = client_.StartWatch(
      {.key = std::string(kLivenessPrefix),
       .range_end = PrefixEnd(kLivenessPrefix),
       .start_revision = from_revision,
       .deletes_only = true},
      [this](const WatchUpdate& update) { OnWatch(update); });
}

void ClientLiveness::SawLive(const std::vector<std::string>& ids) {
  absl::MutexLock lock(&mu_);
  if (ids.size() == 1 && watch_ != nullptr) seen_live_[ids[0]] = clock_.Now();
}

bool ClientLiveness::KnownLive(const std::vector<std::string>& ids) {
  absl::MutexLock lock(&mu_);
  if (ids.size() != 1) return false;
  auto it = seen_live_.find(ids[0]);
  return it != seen_live_.end() && clock_.Now() < it->second + recheck_;
}

void ClientLiveness::Unwatch(absl::string_view name,
                             const std::vector<std::string>& ids) {
  absl::MutexLock lock(&mu_);
  for (const std::string& id : ids) {
    auto it = waits_.find(id);
    if (it == waits_.end()) continue;
    it->second.erase(name);
    if (it->second.empty()) waits_.erase(it);
  }
}

void ClientLiveness::OnWatch(const WatchUpdate& update) {
  if (update.kind == WatchUpdate::Kind::kCompacted ||
      update.kind == WatchUpdate::Kind::kEnded) {
    {
      absl::MutexLock lock(&mu_);
      seen_live_.clear();
    }
    hub_.NotifyAll();  // deletions may have been missed
    return;
  }
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    for (const mvccpb::Event& event : update.events) {
      absl::string_view id = event.kv().key();
      if (!absl::ConsumePrefix(&id, kLivenessPrefix)) continue;
      seen_live_.erase(id);
      auto it = waits_.find(id);
      if (it == waits_.end()) continue;
      names.insert(names.end(), it->second.begin(), it->second.end());
      waits_.erase(it);
    }
  }
  for (const std::string& name : names) hub_.Notify(name);
}

void ClientLiveness::Shutdown() {
  std::unique_ptr<Watch> watch;
  std::optional<Current> current;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    watch = std::move(watch_);
    current = std::move(current_);
    current_.reset();
  }
  if (watch != nullptr) watch->Cancel();
  // The core released or gave up every hold first (C13): nothing believes
  // in the key now. If this fails, the key lapses within its TTL.
  if (current.has_value()) {
    (void)client_.LeaseRevoke(
        current->lease.id,
        {.deadline = MonotonicNow() + client_.options().attempt_timeout});
  }
}

}  // namespace dlock::etcd
