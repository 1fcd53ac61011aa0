// The observer's names and the core's calls to it (observer_calls.h).
#include <cstdio>

#include "observer_calls.h"

namespace dlock {

absl::string_view LossCauseName(LossCause cause) {
  switch (cause) {
    case LossCause::kGone:
      return "gone";
    case LossCause::kUnconfirmed:
      return "unconfirmed";
    case LossCause::kLeaseEnded:
      return "lease_ended";
    case LossCause::kClientClosed:
      return "client_closed";
  }
  return "unknown";
}

absl::string_view ReleaseFailureStageName(ReleaseFailureEvent::Stage stage) {
  switch (stage) {
    case ReleaseFailureEvent::Stage::kCaller:
      return "caller";
    case ReleaseFailureEvent::Stage::kBackground:
      return "background";
    case ReleaseFailureEvent::Stage::kClose:
      return "close";
  }
  return "unknown";
}

absl::string_view BackendOperationName(BackendOperation operation) {
  switch (operation) {
    case BackendOperation::kAcquire:
      return "acquire";
    case BackendOperation::kRelease:
      return "release";
    case BackendOperation::kRenew:
      return "renew";
    case BackendOperation::kInspect:
      return "inspect";
    case BackendOperation::kList:
      return "list";
    case BackendOperation::kForceUnlock:
      return "force_unlock";
    case BackendOperation::kServerMemory:
      return "server_memory";
    case BackendOperation::kRenewLiveness:
      return "renew_liveness";
  }
  return "unknown";
}

namespace internal {

void ObserverCalls::ReportThrow(const char* what) const noexcept {
  if (reported_.exchange(true)) return;
  std::fprintf(stderr,
               "dlock: the LockObserver of a client in namespace '%s' threw "
               "(%s); its events that throw are dropped, the client goes on\n",
               lock_namespace_.c_str(), what);
}

void TimedBackend::Tell(BackendOperation operation, absl::string_view name,
                        int calls, MonoTime start,
                        absl::StatusCode code) const {
  observer_.Tell(&LockObserver::OnBackendCall,
                 BackendCallEvent{.lock_namespace = observer_.lock_namespace(),
                                  .operation = operation,
                                  .name = name,
                                  .calls = calls,
                                  .latency = clock_.Now() - start,
                                  .code = code});
}

absl::StatusOr<Grant> TimedBackend::Acquire(const AcquireCall& call) {
  const MonoTime start = clock_.Now();
  absl::StatusOr<Grant> result = ForwardingBackend::Acquire(call);
  Tell(BackendOperation::kAcquire, call.name, 1, start, result.status().code());
  return result;
}

absl::StatusOr<int64_t> TimedBackend::Release(const ReleaseCall& call) {
  const MonoTime start = clock_.Now();
  absl::StatusOr<int64_t> result = ForwardingBackend::Release(call);
  Tell(BackendOperation::kRelease, call.name, 1, start, result.status().code());
  return result;
}

absl::Status TimedBackend::Renew(const RenewCall& call) {
  const MonoTime start = clock_.Now();
  absl::Status result = ForwardingBackend::Renew(call);
  Tell(BackendOperation::kRenew, call.name, 1, start, result.code());
  return result;
}

std::vector<absl::Status> TimedBackend::RenewMany(
    absl::Span<const RenewCall> calls) {
  const MonoTime start = clock_.Now();
  std::vector<absl::Status> results = ForwardingBackend::RenewMany(calls);
  absl::StatusCode code = absl::StatusCode::kOk;
  for (const absl::Status& s : results) {
    if (!s.ok()) {
      code = s.code();
      break;
    }
  }
  Tell(BackendOperation::kRenew,
       calls.size() == 1 ? calls[0].name : absl::string_view(),
       static_cast<int>(calls.size()), start, code);
  return results;
}

absl::Status TimedBackend::RenewLiveness(absl::Duration ttl) {
  const MonoTime start = clock_.Now();
  absl::Status result = ForwardingBackend::RenewLiveness(ttl);
  Tell(BackendOperation::kRenewLiveness, {}, 1, start, result.code());
  return result;
}

absl::StatusOr<LockInfo> TimedBackend::Inspect(absl::string_view name) {
  const MonoTime start = clock_.Now();
  absl::StatusOr<LockInfo> result = ForwardingBackend::Inspect(name);
  Tell(BackendOperation::kInspect, name, 1, start, result.status().code());
  return result;
}

absl::StatusOr<std::vector<LockInfo>> TimedBackend::List(
    absl::string_view prefix) {
  const MonoTime start = clock_.Now();
  absl::StatusOr<std::vector<LockInfo>> result =
      ForwardingBackend::List(prefix);
  Tell(BackendOperation::kList, {}, 1, start, result.status().code());
  return result;
}

absl::Status TimedBackend::ForceUnlock(absl::string_view name) {
  const MonoTime start = clock_.Now();
  absl::Status result = ForwardingBackend::ForceUnlock(name);
  Tell(BackendOperation::kForceUnlock, name, 1, start, result.code());
  return result;
}

absl::Status TimedBackend::ForceUnlockIfToken(absl::string_view name,
                                              uint64_t fencing_token) {
  const MonoTime start = clock_.Now();
  absl::Status result =
      ForwardingBackend::ForceUnlockIfToken(name, fencing_token);
  Tell(BackendOperation::kForceUnlock, name, 1, start, result.code());
  return result;
}

absl::StatusOr<ServerMemory> TimedBackend::ServerMemoryUse() {
  const MonoTime start = clock_.Now();
  absl::StatusOr<ServerMemory> result = ForwardingBackend::ServerMemoryUse();
  Tell(BackendOperation::kServerMemory, {}, 1, start, result.status().code());
  return result;
}

}  // namespace internal
}  // namespace dlock
