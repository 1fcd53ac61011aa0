#include "redis_sentinel.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dlock::redis {

std::optional<Address> MasterAddressOf(const redisReply* r) {
  int port = 0;
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
      r->element[0]->type == REDIS_REPLY_STRING &&
      r->element[1]->type == REDIS_REPLY_STRING &&
      absl::SimpleAtoi(
          absl::string_view(r->element[1]->str, r->element[1]->len), &port)) {
    return Address{std::string(r->element[0]->str, r->element[0]->len), port};
  }
  return std::nullopt;
}

SentinelWatch::SentinelWatch(std::vector<ConnectionConfig> sentinels,
                             std::string master_name)
    : sentinels_(std::move(sentinels)), master_name_(std::move(master_name)) {}

SentinelWatch::~SentinelWatch() { Stop(); }

std::string SentinelWatch::Describe() const {
  std::vector<std::string> hosts;
  for (const ConnectionConfig& s : sentinels_) hosts.push_back(s.endpoint);
  return absl::StrCat("master '", master_name_, "' via Sentinels ",
                      absl::StrJoin(hosts, ","));
}

absl::StatusOr<Address> SentinelWatch::Locate(int cancel_fd) {
  std::string why;
  const size_t first = preferred_.load();
  for (size_t k = 0; k < sentinels_.size(); ++k) {
    const size_t i = (first + k) % sentinels_.size();
    const ConnectionConfig& sentinel = sentinels_[i];
    absl::StatusOr<std::unique_ptr<Connection>> conn =
        Connection::Open(sentinel, cancel_fd);
    if (absl::IsCancelled(conn.status())) return conn.status();
    absl::StatusOr<Reply> reply =
        conn.ok() ? (*conn)->Command(
                        {"SENTINEL", "get-master-addr-by-name", master_name_})
                  : absl::StatusOr<Reply>(conn.status());
    if (!reply.ok()) {
      absl::StrAppend(&why, "; ", reply.status().message());
      continue;
    }
    const redisReply* r = reply->get();
    if (std::optional<Address> master = MasterAddressOf(r)) {
      preferred_.store(i);
      return *master;
    }
    absl::StrAppend(
        &why, "; the Sentinel at ", sentinel.endpoint,
        r->type == REDIS_REPLY_ERROR
            ? absl::StrCat(" answered ", absl::string_view(r->str, r->len))
            : " does not know this master");
  }
  return absl::UnavailableError(
      absl::StrCat("no Sentinel names ", Describe(), why));
}

void SentinelWatch::Start(std::function<void()> moved) {
  // The subscription dials the Sentinels in turn: each dial asks for the
  // next one.
  ConnectionConfig rotating = sentinels_[0];
  rotating.endpoint = absl::StrCat("the Sentinels of ", Describe());
  auto next = std::make_shared<std::atomic<size_t>>(0);
  rotating.locate = [sentinels = sentinels_,
                     next](int) -> absl::StatusOr<Address> {
    const ConnectionConfig& s =
        sentinels[next->fetch_add(1) % sentinels.size()];
    return Address{s.host, s.port};
  };
  const std::string prefix = absl::StrCat(master_name_, " ");
  switches_ = std::make_unique<Subscriber>(
      rotating, "+switch-master",
      Subscriber::Callbacks{
          // "<name> <old host> <old port> <new host> <new port>"
          .on_message =
              [prefix, moved](absl::string_view message) {
                if (absl::StartsWith(message, prefix)) moved();
              },
          .on_gap = moved});
  switches_->StartTrying();
}

void SentinelWatch::Stop() {
  if (switches_ != nullptr) switches_->Stop();
}

}  // namespace dlock::redis
