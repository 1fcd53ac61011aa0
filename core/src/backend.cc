#include "dlock/backend/backend.h"

namespace dlock {

std::vector<absl::Status> Backend::RenewMany(
    absl::Span<const RenewCall> calls) {
  std::vector<absl::Status> results;
  results.reserve(calls.size());
  for (const RenewCall& call : calls) results.push_back(Renew(call));
  return results;
}

MonoTime Backend::HeldUntil(absl::string_view, absl::string_view,
                            const HoldRecord*) {
  return MonoTime::InfiniteFuture();
}

absl::Status Backend::RenewLiveness(absl::Duration) {
  return absl::UnimplementedError("this backend keeps no liveness record");
}

absl::StatusOr<std::vector<LockInfo>> Backend::List(absl::string_view) {
  return absl::UnimplementedError("this backend cannot list its locks");
}

absl::Status Backend::ForceUnlockIfToken(absl::string_view, uint64_t) {
  return absl::UnimplementedError(
      "this backend cannot force-unlock on a fencing token");
}

absl::StatusOr<ServerMemory> Backend::ServerMemoryUse() {
  return absl::UnimplementedError(
      "this backend's server does not report its memory use");
}

const char* FencingStrengthName(FencingStrength strength) {
  switch (strength) {
    case FencingStrength::kProcess:
      return "process";
    case FencingStrength::kServerMemory:
      return "server-memory";
    case FencingStrength::kDurable:
      return "durable";
  }
  return "unknown";
}

}  // namespace dlock
