#include "etcd_watch.h"

#include <grpcpp/client_context.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "etcd_client.h"
#include "etcd_endpoints.h"
#include "etcd_status.h"

namespace dlock::etcd {

Watch::Watch(std::shared_ptr<Endpoints> endpoints, WatchSpec spec,
             Callback on_update)
    : endpoints_(std::move(endpoints)),
      spec_(std::move(spec)),
      on_update_(std::move(on_update)) {
  {
    absl::MutexLock lock(&mu_);
    next_revision_ = spec_.start_revision;
  }
  thread_ = std::thread([this] { Run(); });
}

Watch::~Watch() { Cancel(); }

void Watch::Cancel() {
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    thread_.join();
  }
  // From the callback itself: the thread sees the flag and ends; the
  // destructor, on another thread, joins it.
}

int64_t Watch::next_revision() const {
  absl::MutexLock lock(&mu_);
  return next_revision_;
}

int Watch::streams_opened() const {
  absl::MutexLock lock(&mu_);
  return streams_opened_;
}

void Watch::Tell(WatchUpdate update) {
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return;
  }
  on_update_(update);
}

bool Watch::PauseUnlessCancelled(absl::Duration pause) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&cancelled_), pause);
  return !cancelled_;
}

void Watch::Run() {
  int failures = 0;  // streams in a row that broke before they worked
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) return;
    }
    const size_t i = endpoints_->preferred();
    absl::Status final_status;
    StreamEnd end = StreamEnd::kRetry;
    if (endpoints_
            ->Connect(i, MonotonicNow() + endpoints_->options().connect_timeout)
            .ok()) {
      end = RunStream(i, final_status);
    }
    if (end == StreamEnd::kFinal) {
      Tell({.kind = WatchUpdate::Kind::kEnded, .status = final_status});
      return;
    }
    if (end == StreamEnd::kResumeHere) {
      failures = 0;
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) return;  // the stream ended because of Cancel()
    }
    endpoints_->MoveOff(i);
    if (stream_worked_) failures = 0;
    ++failures;
    // Every member in turn at once; then 50 ms, doubling to 1 s, a round.
    if (failures % endpoints_->size() != 0) continue;
    const int round = static_cast<int>(failures / endpoints_->size());
    const absl::Duration pause =
        std::min(absl::Milliseconds(50) * (1 << std::min(round - 1, 5)),
                 absl::Seconds(1));
    if (!PauseUnlessCancelled(pause)) return;
  }
}

Watch::StreamEnd Watch::RunStream(size_t i, absl::Status& final_status) {
  stream_worked_ = false;
  token_refused_ = false;
  grpc::ClientContext context;
  // No deadline: the stream lasts as long as the watch. A member that stops
  // answering is found by the connection's keepalive pings.
  absl::StatusOr<std::string> token =
      endpoints_->Prepare(i, absl::InfiniteFuture(), context);
  if (!token.ok()) {
    if (token.status().code() == absl::StatusCode::kUnavailable) {
      return StreamEnd::kRetry;
    }
    final_status = token.status();
    return StreamEnd::kFinal;
  }
  etcdserverpb::WatchRequest request;
  etcdserverpb::WatchCreateRequest& create = *request.mutable_create_request();
  create.set_key(spec_.key);
  create.set_range_end(spec_.range_end);
  create.set_prev_kv(spec_.prev_kv);
  if (spec_.deletes_only) {
    create.add_filters(etcdserverpb::WatchCreateRequest::NOPUT);
  }
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return StreamEnd::kRetry;
    context_ = &context;
    ++streams_opened_;
    create.set_start_revision(next_revision_);
  }
  auto stream = endpoints_->connection(i)->watch->Watch(&context);
  StreamEnd end = StreamEnd::kRetry;
  etcdserverpb::WatchResponse response;
  if (stream->Write(request)) {
    while (stream->Read(&response)) {
      end = Handle(response, i, final_status);
      if (end != StreamEnd::kContinue) break;
    }
  }
  if (end == StreamEnd::kContinue) end = StreamEnd::kRetry;
  context.TryCancel();  // when the loop left a stream that was still open
  while (stream->Read(&response)) {
  }
  const grpc::Status status = stream->Finish();

  {
    absl::MutexLock lock(&mu_);
    context_ = nullptr;
  }
  if (token_refused_) {
    endpoints_->DropToken(*token);
    return StreamEnd::kRetry;
  }
  if (end != StreamEnd::kRetry || status.ok()) return end;
  const ClassifiedFailure failure =
      ClassifyFailure(status, endpoints_->name(i), "Watch");
  if (failure.kind == AttemptFailure::kBadToken) endpoints_->DropToken(*token);
  if (failure.kind != AttemptFailure::kFinal) return StreamEnd::kRetry;
  final_status = failure.status;
  return StreamEnd::kFinal;
}

Watch::StreamEnd Watch::Handle(const etcdserverpb::WatchResponse& response,
                               size_t i, absl::Status& final_status) {
  if (response.compact_revision() > 0) {
    {
      absl::MutexLock lock(&mu_);
      next_revision_ = response.compact_revision();
    }
    Tell({.kind = WatchUpdate::Kind::kCompacted,
          .revision = response.compact_revision()});
    return StreamEnd::kResumeHere;
  }
  if (response.canceled()) {
    const std::string& reason = response.cancel_reason();
    // etcd 3.4 refuses a watch whose token it forgot in a cancel, not in
    // the stream's status.
    if (absl::StrContains(reason, "invalid auth token")) {
      token_refused_ = true;
      return StreamEnd::kRetry;
    }
    if (!absl::StrContains(reason, "permission denied")) {
      return StreamEnd::kRetry;  // "no leader" and the like: elsewhere
    }
    final_status = absl::PermissionDeniedError(
        absl::StrCat("etcd ", endpoints_->name(i), ": Watch of '", spec_.key,
                     "': ", reason));
    return StreamEnd::kFinal;
  }
  int64_t told = 0;
  {
    absl::MutexLock lock(&mu_);
    if (response.created()) {
      if (next_revision_ == 0) {
        next_revision_ = response.header().revision() + 1;
      }
    } else if (response.events_size() > 0) {
      next_revision_ =
          response.events(response.events_size() - 1).kv().mod_revision() + 1;
    } else {
      // A progress notice: every later event has a higher revision.
      next_revision_ =
          std::max(next_revision_, response.header().revision() + 1);
    }
    told = next_revision_ - 1;
  }
  if (response.created()) stream_worked_ = true;
  if (response.created() && !started_told_) {
    started_told_ = true;
    Tell({.kind = WatchUpdate::Kind::kStarted, .revision = told});
  } else if (response.events_size() > 0) {
    Tell({.kind = WatchUpdate::Kind::kEvents,
          .events = {response.events().begin(), response.events().end()},
          .revision = told});
  }
  return StreamEnd::kContinue;
}

}  // namespace dlock::etcd
