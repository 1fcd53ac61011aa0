#include "etcd_lease_keeper.h"

#include <grpcpp/client_context.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "etcd_client.h"
#include "etcd_endpoints.h"
#include "etcd_rpc.grpc.pb.h"
#include "etcd_status.h"

namespace dlock::etcd {

struct LeaseKeeper::Stream {
  size_t endpoint = 0;
  std::string token;
  grpc::ClientContext context;
  std::unique_ptr<
      grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest,
                               etcdserverpb::LeaseKeepAliveResponse>>
      rw;
  std::thread reader;
  int answers = 0;  // under the keeper's mu_
};

LeaseKeeper::LeaseKeeper(Endpoints& endpoints) : endpoints_(endpoints) {
  thread_ = std::thread([this] { Run(); });
}

LeaseKeeper::~LeaseKeeper() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (stream_ != nullptr) stream_->context.TryCancel();
  }
  thread_.join();
}

void LeaseKeeper::Keep(int64_t lease, absl::Duration interval,
                       std::function<void()> on_gone) {
  absl::MutexLock lock(&mu_);
  Kept& kept = kept_[lease];
  kept.interval = interval;
  kept.next_due = MonotonicNow();
  kept.on_gone = std::move(on_gone);
  wake_ = true;
}

void LeaseKeeper::Forget(int64_t lease) {
  absl::MutexLock lock(&mu_);
  kept_.erase(lease);
}

std::optional<absl::Time> LeaseKeeper::KnownAliveUntil(int64_t lease) const {
  absl::MutexLock lock(&mu_);
  auto it = kept_.find(lease);
  if (it == kept_.end()) return std::nullopt;
  return it->second.alive_until;
}

int LeaseKeeper::streams_opened() const {
  absl::MutexLock lock(&mu_);
  return streams_opened_;
}

absl::StatusOr<absl::Duration> LeaseKeeper::KeepAliveOnce(int64_t lease,
                                                          absl::Time deadline) {
  return KeepAliveEach(absl::MakeConstSpan(&lease, 1), deadline).front();
}

std::vector<absl::StatusOr<absl::Duration>> LeaseKeeper::KeepAliveEach(
    absl::Span<const int64_t> leases, absl::Time deadline) {
  if (leases.empty()) return {};
  size_t unanswered = leases.size();
  std::vector<std::shared_ptr<Waiter>> waiters;
  waiters.reserve(leases.size());
  absl::MutexLock lock(&mu_);
  for (int64_t lease : leases) {
    waiters.push_back(std::make_shared<Waiter>());
    waiters.back()->unanswered = &unanswered;
    to_send_.push_back(Request{.lease = lease, .waiters = {waiters.back()}});
  }
  wake_ = true;
  // Abseil's timed wait ends at a wall clock instant, which a step of the
  // wall clock moves: the monotonic deadline decides.
  auto all_answered = [&unanswered] { return unanswered == 0; };
  while (unanswered > 0 && MonotonicNow() < deadline) {
    mu_.AwaitWithTimeout(absl::Condition(&all_answered),
                         deadline - MonotonicNow());
  }
  std::vector<absl::StatusOr<absl::Duration>> results;
  results.reserve(leases.size());
  for (size_t i = 0; i < leases.size(); ++i) {
    Waiter& waiter = *waiters[i];
    waiter.unanswered = nullptr;  // an answer after this leaves it alone
    if (waiter.done) {
      results.push_back(waiter.result);
    } else {
      results.push_back(absl::UnavailableError(
          absl::StrCat("etcd ", endpoints_.Names(),
                       ": no member answered a keepalive of lease ", leases[i],
                       " in time")));
    }
  }
  return results;
}

absl::Time LeaseKeeper::Schedule(absl::Time now) {
  absl::Time next = absl::InfiniteFuture();
  for (auto& [lease, kept] : kept_) {
    if (kept.next_due <= now) {
      const bool queued = std::any_of(
          to_send_.begin(), to_send_.end(),
          [lease = lease](const Request& r) { return r.lease == lease; });
      if (!queued) to_send_.push_back(Request{.lease = lease});
      kept.next_due = now + kept.interval;
    }
    next = std::min(next, kept.next_due);
  }
  return next;
}

bool LeaseKeeper::Stalled(absl::Time now) const {
  return !in_flight_.empty() &&
         now - in_flight_.front().sent > endpoints_.options().attempt_timeout;
}

bool LeaseKeeper::HasWork() const { return stopping_ || wake_ || broken_; }

void LeaseKeeper::Run() {
  while (true) {
    Stream* stream = nullptr;
    std::vector<int64_t> batch;
    {
      absl::MutexLock lock(&mu_);
      absl::Time wake_at = Schedule(MonotonicNow());
      if (!in_flight_.empty()) {
        wake_at = std::min(wake_at, in_flight_.front().sent +
                                        endpoints_.options().attempt_timeout);
      }
      const bool send_now = !to_send_.empty() && !broken_;
      if (!send_now && !broken_ && !Stalled(MonotonicNow())) {
        mu_.AwaitWithTimeout(absl::Condition(this, &LeaseKeeper::HasWork),
                             wake_at - MonotonicNow());
      }
      wake_ = false;
      if (stopping_) break;
      Schedule(MonotonicNow());
      const bool healthy =
          stream_ != nullptr && !broken_ && !Stalled(MonotonicNow());
      if (healthy) {
        stream = stream_.get();
        for (Request& r : to_send_) {
          r.sent = MonotonicNow();
          batch.push_back(r.lease);
          in_flight_.push_back(std::move(r));
        }
        to_send_.clear();
      } else if (stream_ == nullptr && to_send_.empty()) {
        continue;  // nothing to send: no stream needed yet
      }
    }
    if (stream == nullptr) {
      Reconnect();
      continue;
    }
    for (int64_t lease : batch) {
      etcdserverpb::LeaseKeepAliveRequest request;
      request.set_id(lease);
      if (!stream->rw->Write(request)) {
        absl::MutexLock lock(&mu_);
        broken_ = true;
        break;
      }
    }
  }
  Close();
}

void LeaseKeeper::Reconnect() {
  Close();
  const bool opened = Open();
  absl::MutexLock lock(&mu_);
  if (!opened) ++failures_;
  // Every member in turn at once; then 50 ms, doubling to 1 s, a round.
  if (failures_ == 0 || failures_ % endpoints_.size() != 0) return;
  const int round = static_cast<int>(failures_ / endpoints_.size());
  mu_.AwaitWithTimeout(
      absl::Condition(&stopping_),
      std::min(absl::Milliseconds(50) * (1 << std::min(round - 1, 5)),
               absl::Seconds(1)));
}

bool LeaseKeeper::Open() {
  const size_t i = endpoints_.preferred();
  if (!endpoints_
           .Connect(i, MonotonicNow() + endpoints_.options().connect_timeout)
           .ok()) {
    endpoints_.MoveOff(i);
    return false;
  }
  auto stream = std::make_unique<Stream>();
  stream->endpoint = i;
  absl::StatusOr<std::string> token =
      endpoints_.Prepare(i, absl::InfiniteFuture(), stream->context);
  if (!token.ok()) {
    endpoints_.MoveOff(i);
    return false;
  }
  stream->token = *token;
  stream->rw =
      endpoints_.connection(i)->lease->LeaseKeepAlive(&stream->context);
  Stream* raw = stream.get();
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) raw->context.TryCancel();
    stream_ = std::move(stream);
    broken_ = false;
    ++streams_opened_;
  }
  raw->reader = std::thread([this, raw] { Read(raw); });
  return true;
}

void LeaseKeeper::Close() {
  Stream* raw = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (stream_ == nullptr) return;
    raw = stream_.get();
    raw->context.TryCancel();
  }
  // The reader ends once the cancel reaches it; the stream goes after it.
  raw->reader.join();
  std::unique_ptr<Stream> stream;
  {
    absl::MutexLock lock(&mu_);
    stream = std::move(stream_);
    // Unanswered keepalives go out again, first, on the next stream.
    to_send_.insert(to_send_.begin(),
                    std::make_move_iterator(in_flight_.begin()),
                    std::make_move_iterator(in_flight_.end()));
    in_flight_.clear();
    broken_ = false;
    // A stream that broke before it answered anything counts as a member
    // that failed, for the backoff.
    failures_ = stream->answers == 0 ? failures_ + 1 : 0;
  }
  const grpc::Status status = stream->rw->Finish();
  const ClassifiedFailure failure = ClassifyFailure(
      status, endpoints_.name(stream->endpoint), "LeaseKeepAlive");
  if (failure.kind == AttemptFailure::kBadToken) {
    endpoints_.DropToken(stream->token);
  } else if (!status.ok()) {
    endpoints_.MoveOff(stream->endpoint);
  }
}

void LeaseKeeper::Read(Stream* stream) {
  etcdserverpb::LeaseKeepAliveResponse response;
  while (stream->rw->Read(&response)) {
    Answered(stream, response.id(), response.ttl());
  }
  absl::MutexLock lock(&mu_);
  broken_ = true;
}

void LeaseKeeper::Answered(Stream* stream, int64_t lease, int64_t ttl) {
  std::function<void()> on_gone;
  {
    absl::MutexLock lock(&mu_);
    if (in_flight_.empty() || in_flight_.front().lease != lease) {
      // Not the answer of the oldest request: the stream cannot be read.
      broken_ = true;
      stream->context.TryCancel();
      return;
    }
    Request request = std::move(in_flight_.front());
    in_flight_.pop_front();
    ++stream->answers;
    absl::StatusOr<absl::Duration> result = absl::Seconds(ttl);
    if (ttl <= 0) {
      result = absl::NotFoundError(
          absl::StrCat("etcd ", endpoints_.name(stream->endpoint), ": lease ",
                       lease, " is gone (expired or revoked)"));
      auto kept = kept_.find(lease);
      if (kept != kept_.end()) {
        on_gone = std::move(kept->second.on_gone);
        kept_.erase(kept);
      }
    } else if (auto kept = kept_.find(lease); kept != kept_.end()) {
      const absl::Time until = request.sent + absl::Seconds(ttl);
      kept->second.alive_until =
          std::max(kept->second.alive_until.value_or(until), until);
    }
    for (const std::shared_ptr<Waiter>& waiter : request.waiters) {
      waiter->result = result;
      waiter->done = true;
      if (waiter->unanswered != nullptr) --*waiter->unanswered;
    }
  }
  if (on_gone) on_gone();
}

}  // namespace dlock::etcd
