#include "etcd_endpoints.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dlock/clock.h"
#include "etcd_client.h"
#include "etcd_status.h"

namespace dlock::etcd {
namespace {

absl::StatusOr<std::string> ReadPem(absl::string_view option,
                                    const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd: ", option, " ", path, " cannot be read"));
  }
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(
    const ClientOptions& options) {
  if (!options.tls) {
    if (!options.tls_ca.empty() || !options.tls_cert.empty() ||
        !options.tls_key.empty() || !options.tls_server_name.empty()) {
      return absl::InvalidArgumentError(
          "etcd: tls_ca, tls_cert, tls_key and tls_server_name need TLS");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "etcd: a client certificate needs both tls_cert and tls_key");
  }
  grpc::SslCredentialsOptions ssl;
  const std::pair<absl::string_view, std::string*> files[] = {
      {"tls_ca", &ssl.pem_root_certs},
      {"tls_cert", &ssl.pem_cert_chain},
      {"tls_key", &ssl.pem_private_key}};
  const std::string* paths[] = {&options.tls_ca, &options.tls_cert,
                                &options.tls_key};
  for (int f = 0; f < 3; ++f) {
    if (paths[f]->empty()) continue;
    absl::StatusOr<std::string> pem = ReadPem(files[f].first, *paths[f]);
    if (!pem.ok()) return pem.status();
    *files[f].second = *std::move(pem);
  }
  return grpc::SslCredentials(ssl);
}

grpc::ChannelArguments ChannelArgs(const ClientOptions& options) {
  grpc::ChannelArguments args;
  // Each client its own connections, so that clients fail independently
  // and a test can tell whose connection broke.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // A member back from a restart is found within a second, not after
  // gRPC's default backoff of up to two minutes.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Despite its name, how long one connection attempt may take, TLS
  // handshake included: connect_timeout. gRPC's 20 s default left a client
  // whose attempt met a member still starting (the port accepted, nothing
  // answered) unable to reach it for most of 20 s after it was up.
  args.SetInt(
      GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options.connect_timeout)));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
              absl::ToInt64Milliseconds(options.keepalive_time));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              absl::ToInt64Milliseconds(options.keepalive_timeout));
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Listings of many locks may pass gRPC's default 4 MiB.
  args.SetMaxReceiveMessageSize(256 << 20);
  if (!options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  return args;
}

}  // namespace

absl::Time MonotonicNow() {
  return absl::UnixEpoch() + Clock::Real().Now().since_origin();
}

std::chrono::system_clock::time_point GrpcDeadline(absl::Time deadline) {
  const absl::Duration remaining = std::clamp(
      deadline - MonotonicNow(), absl::ZeroDuration(), absl::Hours(24 * 365));
  return std::chrono::system_clock::now() +
         absl::ToChronoNanoseconds(remaining);
}

absl::StatusOr<std::unique_ptr<Endpoints>> Endpoints::Create(
    const ClientOptions& options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("etcd: no endpoint given");
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      Credentials(options);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<Endpoints> endpoints(new Endpoints(options));
  endpoints->credentials_ = *std::move(credentials);
  endpoints->args_ = ChannelArgs(options);
  for (const std::string& name : options.endpoints) {
    endpoints->members_.push_back(
        Member{.name = name, .connection = endpoints->NewConnection(name)});
  }
  return endpoints;
}

std::shared_ptr<Endpoints::Connection> Endpoints::NewConnection(
    const std::string& name) const {
  auto c = std::make_shared<Connection>();
  c->channel = grpc::CreateCustomChannel(name, credentials_, args_);
  c->kv = etcdserverpb::KV::NewStub(c->channel);
  c->lease = etcdserverpb::Lease::NewStub(c->channel);
  c->watch = etcdserverpb::Watch::NewStub(c->channel);
  c->auth = etcdserverpb::Auth::NewStub(c->channel);
  c->maintenance = etcdserverpb::Maintenance::NewStub(c->channel);
  return c;
}

std::shared_ptr<Endpoints::Connection> Endpoints::connection(size_t i) const {
  absl::MutexLock lock(&connections_mu_);
  return members_[i].connection;
}

void Endpoints::NotConnected(size_t i,
                             const std::shared_ptr<Connection>& tried) {
  const absl::Time now = MonotonicNow();
  absl::MutexLock lock(&connections_mu_);
  Member& m = members_[i];
  if (m.connection != tried) return;  // replaced already
  if (m.failing_since == absl::InfiniteFuture()) {
    m.failing_since = now;
  } else if (now - m.failing_since >=
             std::max(options_.connect_timeout, absl::Seconds(1))) {
    m.connection = NewConnection(m.name);
    m.failing_since = now;
  }
}

std::string Endpoints::Names() const {
  return absl::StrJoin(options_.endpoints, ",");
}

void Endpoints::MoveOff(size_t i) {
  size_t expected = i;
  preferred_.compare_exchange_strong(expected, (i + 1) % members_.size());
}

absl::Status Endpoints::Connect(size_t i, absl::Time deadline) {
  const std::shared_ptr<Connection> c = connection(i);
  grpc::Channel& channel = *c->channel;
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  // Until connected, or the last attempt failed: a member that refused or
  // failed the TLS handshake is not waited for (its channel tries again
  // after a backoff; the call meanwhile tries the next member).
  while (state != GRPC_CHANNEL_READY &&
         state != GRPC_CHANNEL_TRANSIENT_FAILURE &&
         channel.WaitForStateChange(state, GrpcDeadline(deadline))) {
    state = channel.GetState(/*try_to_connect=*/true);
  }
  if (state == GRPC_CHANNEL_READY) {
    absl::MutexLock lock(&connections_mu_);
    if (members_[i].connection == c) {
      members_[i].failing_since = absl::InfiniteFuture();
    }
    return absl::OkStatus();
  }
  NotConnected(i, c);
  // A call that does not wait for the connection fails at once with the
  // reason of the last failed attempt (refused, TLS handshake...). It is a
  // range with no key: harmless if it reached etcd after all.
  grpc::ClientContext probe;
  probe.set_wait_for_ready(false);
  probe.set_deadline(GrpcDeadline(MonotonicNow() + absl::Milliseconds(200)));
  etcdserverpb::RangeRequest request;
  etcdserverpb::RangeResponse response;
  const grpc::Status why = c->kv->Range(&probe, request, &response);
  return absl::UnavailableError(
      absl::StrCat("etcd ", members_[i].name, ": cannot connect",
                   why.ok() ? "" : absl::StrCat(": ", why.error_message())));
}

absl::StatusOr<std::string> Endpoints::Prepare(size_t i, absl::Time deadline,
                                               grpc::ClientContext& context) {
  context.set_deadline(GrpcDeadline(deadline));
  // etcd's interceptor then refuses a call on a member without a leader
  // ("no leader") instead of letting it wait for one.
  context.AddMetadata("hasleader", "true");
  if (options_.user.empty()) return std::string();
  // A stream's context has no deadline; authenticating for it has one.
  absl::StatusOr<std::string> token =
      Token(i, std::min(deadline, MonotonicNow() + options_.attempt_timeout));
  if (!token.ok()) return token.status();
  context.AddMetadata("token", *token);
  return token;
}

void Endpoints::DropToken(const std::string& token) {
  absl::MutexLock lock(&mu_);
  if (token_ == token) token_.clear();
}

absl::StatusOr<std::string> Endpoints::Token(size_t i, absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    if (!token_.empty()) return token_;
  }
  absl::MutexLock auth_lock(&auth_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (!token_.empty()) return token_;  // another thread got one meanwhile
  }
  absl::StatusOr<std::string> token = Authenticate(i, deadline);
  if (!token.ok()) return token.status();
  absl::MutexLock lock(&mu_);
  token_ = *token;
  return token;
}

absl::StatusOr<std::string> Endpoints::Authenticate(size_t i,
                                                    absl::Time deadline) {
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadline(deadline));
  context.AddMetadata("hasleader", "true");
  etcdserverpb::AuthenticateRequest request;
  request.set_name(options_.user);
  request.set_password(options_.password);
  etcdserverpb::AuthenticateResponse response;
  const grpc::Status status =
      connection(i)->auth->Authenticate(&context, request, &response);
  if (status.ok()) return response.token();
  const ClassifiedFailure failure = ClassifyFailure(
      status, members_[i].name,
      absl::StrCat("Authenticate as user '", options_.user, "'"));
  if (failure.kind == AttemptFailure::kFinal) return failure.status;
  // Authenticating twice is harmless: another endpoint may do it.
  return absl::UnavailableError(failure.status.message());
}

namespace {

// What RunCall() learned from the attempts that failed.
struct CallLog {
  std::vector<std::string> failures;
  bool maybe_applied = false;
  int consecutive = 0;  // failures since the last answer, for the backoff
  // Connections that failed in a row, every member's: none listens.
  size_t unconnected = 0;

  void Add(const absl::Status& status) {
    failures.emplace_back(status.message());
    ++consecutive;
  }
};

// After a failure on every endpoint in turn, a pause before the next round:
// 50 ms, doubling to 500 ms, never past the deadline.
void BackOff(const CallLog& log, size_t endpoints, absl::Time deadline) {
  if (log.consecutive == 0 || log.consecutive % endpoints != 0) return;
  const int round = static_cast<int>(log.consecutive / endpoints);
  const absl::Duration pause =
      std::min(absl::Milliseconds(50) * (1 << std::min(round - 1, 4)),
               absl::Milliseconds(500));
  absl::SleepFor(std::min(pause, deadline - MonotonicNow()));
}

absl::Status GaveUp(const Endpoints& endpoints, const CallSpec& spec,
                    const CallLog& log) {
  // Each distinct reason once, in the order first seen: the first failure
  // of a member says most (a later reconnect may only say it was cut).
  std::vector<std::string> reasons;
  for (const std::string& failure : log.failures) {
    if (std::find(reasons.begin(), reasons.end(), failure) == reasons.end()) {
      reasons.push_back(failure);
    }
  }
  if (reasons.size() > 4) reasons.resize(4);
  absl::Status status = absl::UnavailableError(absl::StrCat(
      "etcd ", endpoints.Names(), ": ", spec.method, " got no answer in ",
      log.failures.size(), " attempts",
      log.unconnected > 0 ? " (no member accepts connections)"
                          : " before its deadline",
      reasons.empty() ? ""
                      : absl::StrCat(" (", absl::StrJoin(reasons, "; "), ")")));
  return log.maybe_applied && !spec.read_only ? OutcomeUnknown(status) : status;
}

}  // namespace

absl::Status RunCall(
    Endpoints& endpoints, const CallSpec& spec,
    absl::FunctionRef<grpc::Status(size_t, grpc::ClientContext&)> attempt) {
  const ClientOptions& options = endpoints.options();
  CallLog log;
  int token_refusals = 0;
  while (MonotonicNow() < spec.deadline) {
    BackOff(log, endpoints.size(), spec.deadline);
    const size_t i = endpoints.preferred();
    const absl::Time now = MonotonicNow();
    absl::Status connected = endpoints.Connect(
        i, std::min(spec.deadline, now + options.connect_timeout));
    if (!connected.ok()) {
      log.Add(connected);
      endpoints.MoveOff(i);
      // Every member refused (or failed) a connection three rounds in a
      // row: the cluster is down, so the call fails fast rather than at its
      // deadline (a leader election keeps members connected, and waits).
      if (++log.unconnected >= 3 * endpoints.size()) break;
      continue;
    }
    log.unconnected = 0;
    const absl::Time attempt_deadline =
        spec.retry_maybe_applied
            ? std::min(spec.deadline, MonotonicNow() + options.attempt_timeout)
            : spec.deadline;
    grpc::ClientContext context;
    absl::StatusOr<std::string> token =
        endpoints.Prepare(i, attempt_deadline, context);
    if (!token.ok()) {
      if (token.status().code() != absl::StatusCode::kUnavailable) {
        return token.status();
      }
      log.Add(token.status());
      endpoints.MoveOff(i);
      continue;
    }
    const grpc::Status status = attempt(i, context);
    if (status.ok()) return absl::OkStatus();
    ClassifiedFailure failure =
        ClassifyFailure(status, endpoints.name(i), spec.method);
    switch (failure.kind) {
      case AttemptFailure::kFinal:
        return failure.status;
      case AttemptFailure::kBadToken:
        // Refused before anything was applied: authenticate and try again.
        endpoints.DropToken(*token);
        if (++token_refusals > 2) return failure.status;
        continue;
      case AttemptFailure::kMaybeApplied:
        if (!spec.retry_maybe_applied) {
          return OutcomeUnknown(std::move(failure.status));
        }
        log.maybe_applied = true;
        break;
      case AttemptFailure::kNotApplied:
        break;
    }
    log.Add(failure.status);
    endpoints.MoveOff(i);
  }
  return GaveUp(endpoints, spec, log);
}

}  // namespace dlock::etcd
