#include "etcd_status.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dlock::etcd {
namespace {

// etcd's errors (its rpctypes package), by the text it sends: the codes
// alone do not tell a timeout from a lost leader.
constexpr absl::string_view kNoLeader = "etcdserver: no leader";
constexpr absl::string_view kTooManyRequests = "etcdserver: too many requests";
constexpr absl::string_view kInvalidToken = "etcdserver: invalid auth token";
constexpr absl::string_view kAuthFailed =
    "etcdserver: authentication failed, invalid user ID or password";
constexpr absl::string_view kNoUser = "etcdserver: user name is empty";

absl::Status Named(absl::StatusCode code, absl::string_view endpoint,
                   absl::string_view method, absl::string_view message) {
  return absl::Status(code,
                      absl::StrCat("etcd ", endpoint, ": ", method, ": ",
                                   message.empty() ? "(no message)" : message));
}

}  // namespace

bool IsOutcomeUnknown(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable &&
         status.GetPayload(kOutcomeUnknownPayloadUrl).has_value();
}

absl::Status OutcomeUnknown(absl::Status status) {
  if (IsOutcomeUnknown(status)) return status;
  absl::Status marked(
      absl::StatusCode::kUnavailable,
      absl::StrCat(status.message(), " (the request may have been applied)"));
  marked.SetPayload(kOutcomeUnknownPayloadUrl, absl::Cord("1"));
  return marked;
}

ClassifiedFailure ClassifyFailure(const grpc::Status& status,
                                  absl::string_view endpoint,
                                  absl::string_view method) {
  const std::string& text = status.error_message();
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  const absl::Status named = Named(code, endpoint, method, text);
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      // "no leader" comes from etcd's interceptor, before the call is
      // handled (the client asks for it with the hasleader metadata).
      if (text == kNoLeader) return {AttemptFailure::kNotApplied, named};
      // A broken connection, "request timed out", "leader changed",
      // "server stopped": the request may have been proposed already.
      return {AttemptFailure::kMaybeApplied, named};
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      if (text == kTooManyRequests) {
        return {AttemptFailure::kNotApplied, named};
      }
      return {AttemptFailure::kFinal, named};  // e.g. the space quota
    case grpc::StatusCode::UNAUTHENTICATED:
      if (text == kInvalidToken) return {AttemptFailure::kBadToken, named};
      return {AttemptFailure::kFinal, named};
    case grpc::StatusCode::INVALID_ARGUMENT:
      if (text == kAuthFailed) {
        return {AttemptFailure::kFinal,
                Named(absl::StatusCode::kUnauthenticated, endpoint, method,
                      "the user name or password was refused (" + text + ")")};
      }
      if (text == kNoUser) {  // a call without a token
        return {AttemptFailure::kFinal,
                Named(absl::StatusCode::kUnauthenticated, endpoint, method,
                      "etcd has authentication on: give a user and password (" +
                          text + ")")};
      }
      return {AttemptFailure::kFinal, named};
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::DATA_LOSS:
      // The request may have gone out before the call ended: unknown.
      return {AttemptFailure::kMaybeApplied,
              Named(absl::StatusCode::kUnavailable, endpoint, method,
                    absl::StrCat(absl::StatusCodeToString(code), ": ", text))};
    default:
      // Permission denied, lease not found, a compacted revision, a
      // request the server does not implement: etcd's answer.
      return {AttemptFailure::kFinal, named};
  }
}

}  // namespace dlock::etcd
