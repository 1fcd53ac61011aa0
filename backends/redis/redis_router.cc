#include "redis_router.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redis_lock_ops.h"

namespace dlock::redis {

std::string Routed::Answer::endpoint() const {
  return master != nullptr ? master->endpoint() : std::string("(none)");
}

void Routed::Take(Master::Pending pending, const std::vector<size_t>& indices,
                  const Master* master) {
  pendings_.push_back(std::make_unique<Master::Pending>(std::move(pending)));
  std::vector<absl::StatusOr<Reply>> replies = pendings_.back()->Await();
  for (size_t j = 0; j < indices.size(); ++j) {
    answers[indices[j]].reply = std::move(replies[j]);
    answers[indices[j]].master = master;
    carried_by_[indices[j]] = static_cast<int>(pendings_.size()) - 1;
  }
}

absl::Status Routed::WaitFor(int pending, const Replication& replication,
                             absl::string_view what, absl::string_view name,
                             const std::string& endpoint) {
  absl::StatusOr<std::vector<Reply>> reply = pendings_[pending]->FollowUp(
      {FormatCommand({"WAIT", absl::StrCat(replication.replicas),
                      absl::StrCat(LeaseMillis(replication.timeout))})});
  if (!reply.ok()) return reply.status();
  const redisReply* r = (*reply)[0].get();
  if (absl::Status s = ReplyError(r, "WAIT", endpoint); !s.ok()) return s;
  if (r->type != REDIS_REPLY_INTEGER) {
    return absl::InternalError(absl::StrCat(
        "redis at ", endpoint, " gave an unexpected reply to WAIT"));
  }
  if (r->integer >= replication.replicas) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "the ", what, " of ", name, " reached ", r->integer, " of the ",
      replication.replicas, " replicas wait_replicas asks for within ",
      absl::FormatDuration(replication.timeout), " (redis at ", endpoint, ")"));
}

std::vector<absl::Status> Routed::Replicated(const std::vector<bool>& wrote,
                                             const Replication& replication,
                                             absl::string_view what,
                                             absl::string_view name) {
  std::vector<absl::Status> out(answers.size());
  if (replication.replicas == 0) return out;
  // One WAIT per connection that wrote, its answer for each of its calls.
  std::vector<std::optional<absl::Status>> waited(pendings_.size());
  for (size_t i = 0; i < answers.size(); ++i) {
    const int p = carried_by_[i];
    if (!wrote[i] || p < 0) continue;
    if (!waited[p].has_value()) {
      waited[p] = WaitFor(p, replication, what, name, answers[i].endpoint());
    }
    out[i] = *waited[p];
  }
  return out;
}

namespace {

class OneMaster : public Router {
 public:
  OneMaster(std::unique_ptr<Master> master, std::function<void()> on_start,
            std::function<void()> on_shutdown)
      : master_(std::move(master)),
        on_start_(std::move(on_start)),
        on_shutdown_(std::move(on_shutdown)) {}
  ~OneMaster() override { Shutdown(); }

  absl::Status Start() override {
    if (on_start_) on_start_();
    return master_->Start();
  }

  void Shutdown() override {
    if (on_shutdown_) on_shutdown_();
    master_->Shutdown();
  }

  Routed Run(std::vector<LockCall> calls) override {
    Routed out(calls.size());
    std::vector<ScriptCall> scripts;
    std::vector<size_t> indices;
    scripts.reserve(calls.size());
    indices.reserve(calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      scripts.push_back(calls[i].build(*master_));
      indices.push_back(i);
    }
    out.Take(master_->Submit(std::move(scripts)), indices, master_.get());
    return out;
  }

  std::vector<Master*> Masters() override { return {master_.get()}; }

  // Subscribed at Start() to the namespace's one channel.
  bool Watch(absl::string_view) override { return false; }

  std::string Describe() const override {
    return absl::StrCat("redis at ", master_->endpoint());
  }

 private:
  const std::unique_ptr<Master> master_;
  const std::function<void()> on_start_;
  const std::function<void()> on_shutdown_;
};

}  // namespace

std::unique_ptr<Router> OneMasterRouter(std::unique_ptr<Master> master,
                                        std::function<void()> on_start,
                                        std::function<void()> on_shutdown) {
  return std::make_unique<OneMaster>(std::move(master), std::move(on_start),
                                     std::move(on_shutdown));
}

absl::StatusOr<std::vector<std::string>> ScanEveryMaster(
    Router& router, absl::string_view key_prefix, absl::string_view prefix) {
  std::vector<std::string> names;
  for (Master* master : router.Masters()) {
    absl::StatusOr<std::vector<std::string>> some =
        ScanNames(*master, key_prefix, prefix);
    if (!some.ok()) return some.status();
    names.insert(names.end(), some->begin(), some->end());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace dlock::redis
