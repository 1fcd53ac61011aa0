#include "etcd_client.h"

#include "absl/strings/str_cat.h"
#include "etcd_endpoints.h"
#include "etcd_lease_keeper.h"

namespace dlock::etcd {

absl::StatusOr<std::unique_ptr<Client>> Client::Create(
    const ClientOptions& options) {
  absl::StatusOr<std::unique_ptr<Endpoints>> endpoints =
      Endpoints::Create(options);
  if (!endpoints.ok()) return endpoints.status();
  return std::unique_ptr<Client>(new Client(*std::move(endpoints)));
}

Client::Client(std::unique_ptr<Endpoints> endpoints)
    : endpoints_(std::move(endpoints)) {}

Client::~Client() {
  std::unique_ptr<LeaseKeeper> keeper;
  {
    absl::MutexLock lock(&mu_);
    keeper = std::move(keeper_);
  }
}

const ClientOptions& Client::options() const { return endpoints_->options(); }

absl::Time Client::Deadline(const CallOptions& call) const {
  return call.deadline == absl::InfinitePast()
             ? MonotonicNow() + endpoints_->options().call_timeout
             : call.deadline;
}

CallSpec Client::WriteSpec(absl::string_view method,
                           const CallOptions& call) const {
  return {.method = method,
          .deadline = Deadline(call),
          .retry_maybe_applied = call.idempotent};
}

namespace {

// One unary call of `spec` through RunCall(): `rpc(endpoint, context,
// response)` is the gRPC method on that endpoint's stub.
template <typename Response, typename Rpc>
absl::StatusOr<Response> Unary(Endpoints& endpoints, const CallSpec& spec,
                               Rpc rpc) {
  Response response;
  const absl::Status status =
      RunCall(endpoints, spec, [&](size_t i, grpc::ClientContext& context) {
        return rpc(i, context, &response);
      });
  if (!status.ok()) return status;
  return response;
}

}  // namespace

absl::StatusOr<etcdserverpb::RangeResponse> Client::Range(
    const etcdserverpb::RangeRequest& request, CallOptions call) {
  return Unary<etcdserverpb::RangeResponse>(
      *endpoints_,
      {.method = "Range",
       .deadline = Deadline(call),
       .retry_maybe_applied = true,
       .read_only = true},
      [&](size_t i, grpc::ClientContext& context, auto* response) {
        return endpoints_->connection(i)->kv->Range(&context, request,
                                                    response);
      });
}

absl::StatusOr<etcdserverpb::TxnResponse> Client::Txn(
    const etcdserverpb::TxnRequest& request, CallOptions call) {
  int sends = 0;
  absl::StatusOr<etcdserverpb::TxnResponse> response =
      Unary<etcdserverpb::TxnResponse>(
          *endpoints_, WriteSpec("Txn", call),
          [&](size_t i, grpc::ClientContext& context, auto* response) {
            ++sends;
            return endpoints_->connection(i)->kv->Txn(&context, request,
                                                      response);
          });
  if (call.sends != nullptr) *call.sends = sends;
  return response;
}

absl::StatusOr<etcdserverpb::PutResponse> Client::Put(
    const etcdserverpb::PutRequest& request, CallOptions call) {
  return Unary<etcdserverpb::PutResponse>(
      *endpoints_, WriteSpec("Put", call),
      [&](size_t i, grpc::ClientContext& context, auto* response) {
        return endpoints_->connection(i)->kv->Put(&context, request, response);
      });
}

absl::StatusOr<etcdserverpb::DeleteRangeResponse> Client::DeleteRange(
    const etcdserverpb::DeleteRangeRequest& request, CallOptions call) {
  return Unary<etcdserverpb::DeleteRangeResponse>(
      *endpoints_, WriteSpec("DeleteRange", call),
      [&](size_t i, grpc::ClientContext& context, auto* response) {
        return endpoints_->connection(i)->kv->DeleteRange(&context, request,
                                                          response);
      });
}

absl::StatusOr<etcdserverpb::LeaseGrantResponse> Client::LeaseGrant(
    absl::Duration ttl, CallOptions call) {
  if (ttl < absl::Seconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "etcd: a lease lasts at least 1s, not ", absl::FormatDuration(ttl)));
  }
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1))));
  absl::StatusOr<etcdserverpb::LeaseGrantResponse> response =
      Unary<etcdserverpb::LeaseGrantResponse>(
          *endpoints_,
          {.method = "LeaseGrant",
           .deadline = Deadline(call),
           .retry_maybe_applied = true},
          [&](size_t i, grpc::ClientContext& context, auto* response) {
            return endpoints_->connection(i)->lease->LeaseGrant(
                &context, request, response);
          });
  if (!response.ok()) return response.status();
  if (!response->error().empty()) {
    return absl::UnavailableError(absl::StrCat(
        "etcd ", endpoints_->Names(), ": LeaseGrant: ", response->error()));
  }
  return response;
}

absl::Status Client::LeaseRevoke(int64_t lease, CallOptions call) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseRevokeResponse response;
  int attempts = 0;
  const absl::Status status =
      RunCall(*endpoints_,
              {.method = "LeaseRevoke",
               .deadline = Deadline(call),
               .retry_maybe_applied = true},
              [&](size_t i, grpc::ClientContext& context) {
                ++attempts;
                return endpoints_->connection(i)->lease->LeaseRevoke(
                    &context, request, &response);
              });
  // A retry that finds the lease gone: an earlier attempt revoked it, or it
  // expired; gone either way.
  if (absl::IsNotFound(status) && attempts > 1) return absl::OkStatus();
  return status;
}

absl::StatusOr<etcdserverpb::LeaseTimeToLiveResponse> Client::LeaseTimeToLive(
    int64_t lease, bool with_keys, CallOptions call) {
  etcdserverpb::LeaseTimeToLiveRequest request;
  request.set_id(lease);
  request.set_keys(with_keys);
  return Unary<etcdserverpb::LeaseTimeToLiveResponse>(
      *endpoints_,
      {.method = "LeaseTimeToLive",
       .deadline = Deadline(call),
       .retry_maybe_applied = true,
       .read_only = true},
      [&](size_t i, grpc::ClientContext& context, auto* response) {
        return endpoints_->connection(i)->lease->LeaseTimeToLive(
            &context, request, response);
      });
}

absl::StatusOr<etcdserverpb::StatusResponse> Client::Status(CallOptions call) {
  return Unary<etcdserverpb::StatusResponse>(
      *endpoints_,
      {.method = "Status",
       .deadline = Deadline(call),
       .retry_maybe_applied = true,
       .read_only = true},
      [&](size_t i, grpc::ClientContext& context, auto* response) {
        return endpoints_->connection(i)->maintenance->Status(
            &context, etcdserverpb::StatusRequest(), response);
      });
}

LeaseKeeper& Client::leases() {
  absl::MutexLock lock(&mu_);
  if (keeper_ == nullptr) keeper_.reset(new LeaseKeeper(*endpoints_));
  return *keeper_;
}

std::unique_ptr<Watch> Client::StartWatch(const WatchSpec& spec,
                                          Watch::Callback on_update) {
  return std::unique_ptr<Watch>(
      new Watch(endpoints_, spec, std::move(on_update)));
}

std::string PrefixEnd(absl::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(end.back() + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key: etcd's "no end"
}

namespace {
etcdserverpb::Compare CompareRevision(
    absl::string_view key, etcdserverpb::Compare::CompareTarget target,
    etcdserverpb::Compare::CompareResult result, int64_t revision) {
  etcdserverpb::Compare compare;
  compare.set_key(std::string(key));
  compare.set_target(target);
  compare.set_result(result);
  if (target == etcdserverpb::Compare::CREATE) {
    compare.set_create_revision(revision);
  } else {
    compare.set_mod_revision(revision);
  }
  return compare;
}
}  // namespace

etcdserverpb::Compare CompareCreateRevision(
    absl::string_view key, etcdserverpb::Compare::CompareResult result,
    int64_t revision) {
  return CompareRevision(key, etcdserverpb::Compare::CREATE, result, revision);
}

etcdserverpb::Compare CompareModRevision(
    absl::string_view key, etcdserverpb::Compare::CompareResult result,
    int64_t revision) {
  return CompareRevision(key, etcdserverpb::Compare::MOD, result, revision);
}

etcdserverpb::Compare CompareValue(absl::string_view key,
                                   etcdserverpb::Compare::CompareResult result,
                                   absl::string_view value) {
  etcdserverpb::Compare compare;
  compare.set_key(std::string(key));
  compare.set_target(etcdserverpb::Compare::VALUE);
  compare.set_result(result);
  compare.set_value(std::string(value));
  return compare;
}

etcdserverpb::RequestOp PutOp(absl::string_view key, absl::string_view value,
                              int64_t lease) {
  etcdserverpb::RequestOp op;
  etcdserverpb::PutRequest& put = *op.mutable_request_put();
  put.set_key(std::string(key));
  put.set_value(std::string(value));
  put.set_lease(lease);
  return op;
}

etcdserverpb::RequestOp DeleteOp(absl::string_view key) {
  etcdserverpb::RequestOp op;
  op.mutable_request_delete_range()->set_key(std::string(key));
  return op;
}

etcdserverpb::RequestOp RangeOp(absl::string_view key) {
  etcdserverpb::RequestOp op;
  op.mutable_request_range()->set_key(std::string(key));
  return op;
}

etcdserverpb::TxnRequest CreateIfAbsent(absl::string_view key,
                                        absl::string_view value,
                                        int64_t lease) {
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() =
      CompareCreateRevision(key, etcdserverpb::Compare::EQUAL, 0);
  *txn.add_success() = PutOp(key, value, lease);
  *txn.add_failure() = RangeOp(key);
  return txn;
}

etcdserverpb::TxnRequest DeleteIfCreatedAt(absl::string_view key,
                                           int64_t create_revision) {
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() =
      CompareCreateRevision(key, etcdserverpb::Compare::EQUAL, create_revision);
  *txn.add_success() = DeleteOp(key);
  *txn.add_failure() = RangeOp(key);
  return txn;
}

etcdserverpb::TxnRequest DeleteIfWrittenAt(absl::string_view key,
                                           int64_t mod_revision) {
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() =
      CompareModRevision(key, etcdserverpb::Compare::EQUAL, mod_revision);
  *txn.add_success() = DeleteOp(key);
  *txn.add_failure() = RangeOp(key);
  return txn;
}

const mvccpb::KeyValue* ReadKey(const etcdserverpb::TxnResponse& response) {
  for (const etcdserverpb::ResponseOp& op : response.responses()) {
    if (op.has_response_range() && op.response_range().kvs_size() > 0) {
      return &op.response_range().kvs(0);
    }
  }
  return nullptr;
}

}  // namespace dlock::etcd
