// Elections (C24): a leadership is an exclusive hold of the election's
// qualified name carrying a value, so the mutex's guarantees make it one
// leader at a time, told once before another is elected (C19, C20); the
// term is the hold's fencing token. Observers read the leader afresh on
// every wake-up of a watch registered before the reading (C9).
#include <utility>

#include "absl/strings/str_cat.h"
#include "primitives.h"
#include "qualified_name.h"

namespace dlock {
namespace internal {

// What a Leadership asks of its client: its proclaims.
class ElectionSite {
 public:
  explicit ElectionSite(std::shared_ptr<ClientCore> core)
      : core_(std::move(core)) {}

  static Leadership Lead(Hold hold, std::string value,
                         std::shared_ptr<ElectionSite> site) {
    return Leadership(std::move(hold), std::move(value), std::move(site));
  }
  absl::Status Proclaim(const Hold& hold, absl::string_view value) {
    return core_->Proclaim(hold, value);
  }

 private:
  const std::shared_ptr<ClientCore> core_;
};

namespace {

constexpr HoldShape kLeadership{.kind = ObjectKind::kElection};

absl::Status CheckValue(absl::string_view name, absl::string_view value) {
  if (value.size() <= kMaxLeaderValueBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("election '", name, "': a value is at most ",
                   kMaxLeaderValueBytes, " bytes, not ", value.size()));
}

LeaderInfo LeaderOf(const ObjectInfo& object) {
  LeaderInfo info{.name = object.name};
  if (object.holders.empty()) return info;
  const HolderInfo& leader = object.holders.front();
  info.has_leader = true;
  info.owner = leader.owner;
  info.value = object.value;
  info.term = leader.fencing_token;
  info.since = leader.since;
  info.remaining_lease = leader.remaining_lease;
  info.leader_live = leader.holder_live;
  return info;
}

class ElectionHandle : public Election {
 public:
  ElectionHandle(std::shared_ptr<ClientCore> core, std::string name)
      : core_(std::move(core)),
        site_(std::make_shared<ElectionSite>(core_)),
        name_(std::move(name)),
        key_(QualifiedName(name_, kLeadership)) {}

  const std::string& name() const override { return name_; }

  absl::StatusOr<Leadership> Campaign(absl::string_view value,
                                      const AcquireOptions& options) override {
    if (absl::Status s = CheckValue(name_, value); !s.ok()) return s;
    absl::StatusOr<Hold> hold = core_->Acquire(
        name_, options, HoldAsk{.shape = kLeadership, .value = value});
    if (!hold.ok()) return hold.status();
    return ElectionSite::Lead(*std::move(hold), std::string(value), site_);
  }

  absl::StatusOr<LeaderInfo> Leader() override {
    absl::StatusOr<ObjectInfo> object =
        core_->InspectObject(ObjectKind::kElection, name_);
    if (!object.ok()) return object.status();
    LeaderInfo info = LeaderOf(*object);
    info.name = name_;
    return info;
  }

  absl::StatusOr<LeaderInfo> WaitForChange(const LeaderInfo& seen,
                                           absl::Duration wait,
                                           const CancelToken& cancel) override {
    if (wait < absl::ZeroDuration()) {
      return absl::InvalidArgumentError("wait must not be negative");
    }
    const MonoTime until = wait == absl::InfiniteDuration()
                               ? MonoTime::InfiniteFuture()
                               : core_->clock().Now() + wait;
    absl::StatusOr<ObjectInfo> object = core_->WaitForObject(
        ObjectKind::kElection, name_, until, cancel,
        [&seen](const ObjectInfo& now) { return !LeaderOf(now).SameAs(seen); });
    if (!object.ok()) return object.status();
    LeaderInfo info = LeaderOf(*object);
    info.name = name_;
    return info;
  }

  absl::Status ResignByToken(absl::string_view owner_token) override {
    return core_->ReleaseByToken(key_, owner_token);
  }

 private:
  const std::shared_ptr<ClientCore> core_;
  const std::shared_ptr<ElectionSite> site_;
  const std::string name_;
  const std::string key_;  // the core's for this election's leaderships
};

}  // namespace

std::unique_ptr<Election> MakeElection(std::shared_ptr<ClientCore> core,
                                       std::string name) {
  return std::make_unique<ElectionHandle>(std::move(core), std::move(name));
}

}  // namespace internal

absl::Status Leadership::Proclaim(absl::string_view value) {
  const std::string key = internal::QualifiedName(
      hold_.lock_name(), HoldShape{.kind = ObjectKind::kElection});
  if (site_ == nullptr || !hold_.active()) {
    return WithContext(NotOwnerError(key),
                       "this Leadership was resigned or never held");
  }
  if (absl::Status s = internal::CheckValue(hold_.lock_name(), value);
      !s.ok()) {
    return s;
  }
  absl::Status proclaimed = site_->Proclaim(hold_, value);
  if (proclaimed.ok()) value_ = std::string(value);
  return proclaimed;
}

}  // namespace dlock
