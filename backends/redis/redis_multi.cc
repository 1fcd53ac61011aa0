#include "redis_multi.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace dlock::redis {
namespace {

// KEYS every part's lock; ARGV owner, lease (ms), will wait, liveness TTL.
ScriptCall MultiAcquireScript(const Master& master, const Keyspace& keys,
                              const Liveness& liveness,
                              absl::Span<const AcquireCall> parts,
                              bool will_wait) {
  ScriptCall call{
      &master.scripts().multi_acquire,
      {},
      {std::string(parts[0].owner), absl::StrCat(LeaseMillis(parts[0].lease)),
       will_wait ? "1" : "0", absl::StrCat(liveness.ttl_ms)}};
  for (const AcquireCall& part : parts) {
    call.keys.push_back(keys.LockKey(part.name));
  }
  return call;
}

// {1, token, holds of each part...} or {0, ms left, 1-based index}.
absl::StatusOr<AllAttempt> ParseMultiAcquire(const redisReply* r, size_t parts,
                                             absl::string_view endpoint) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) {
    return Malformed("multi acquire", endpoint);
  }
  for (size_t i = 0; i < r->elements; ++i) {
    if (r->element[i]->type != REDIS_REPLY_INTEGER) {
      return Malformed("multi acquire", endpoint);
    }
  }
  AllAttempt out;
  if (r->element[0]->integer == 0) {
    const int64_t index = r->element[2]->integer;
    if (r->elements != 3 || index < 1 || static_cast<size_t>(index) > parts) {
      return Malformed("multi acquire", endpoint);
    }
    out.refused = static_cast<size_t>(index - 1);
    out.refusal.holder_lease_left =
        absl::Milliseconds(std::max<int64_t>(r->element[1]->integer, 0));
    return out;
  }
  if (r->element[0]->integer != 1 || r->elements != parts + 2) {
    return Malformed("multi acquire", endpoint);
  }
  const auto token = static_cast<uint64_t>(r->element[1]->integer);
  for (size_t i = 0; i < parts; ++i) {
    out.acquired.push_back(Acquired{token, r->element[i + 2]->integer});
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Grant>> AcquireAllOnOneMaster(
    const ObjectsContext& c, absl::Span<const AcquireCall> parts,
    MonoTime deadline, const CancelToken& cancel) {
  const bool will_wait = deadline > c.clock.Now();
  std::vector<LockCall> one;
  one.push_back(LockCall{parts[0].name, [&](const Master& m) {
                           return MultiAcquireScript(m, c.keys, c.liveness,
                                                     parts, will_wait);
                         }});
  absl::StatusOr<std::vector<Grant>> grants = AcquireAllWithWakeups(
      parts, deadline, cancel, c.releases, c.fallback_poll,
      [&]() -> absl::StatusOr<AllAttempt> {
        Routed routed = c.router.Run(one);
        const Routed::Answer& answer = routed.answers[0];
        if (!answer.reply.ok()) return answer.reply.status();
        absl::StatusOr<AllAttempt> attempt = ParseMultiAcquire(
            answer.reply->get(), parts.size(), answer.endpoint());
        if (!attempt.ok() || attempt->acquired.empty()) return attempt;
        // Not on enough replicas: a failover could hand the names to
        // another owner. Given back (a re-entered name's one hold only);
        // the caller may try again.
        if (absl::Status s = routed.Replicated({true}, c.replication, "grant",
                                               parts[0].name)[0];
            !s.ok()) {
          std::vector<LockCall> releases;
          for (const AcquireCall& part : parts) {
            releases.push_back(LockCall{
                part.name, [&](const Master& m) {
                  return ReleaseScript(m, c.keys, part.name, part.owner, 1);
                }});
          }
          (void)c.router.Run(std::move(releases));
          return s;
        }
        return attempt;
      });
  if (!grants.ok()) return grants.status();
  const absl::Duration ttl = absl::Milliseconds(c.liveness.ttl_ms);
  for (size_t i = 0; i < parts.size(); ++i) {
    RecordGrant(parts[i], (*grants)[i], "", ttl, c.drift, c.held);
  }
  return grants;
}

}  // namespace dlock::redis
