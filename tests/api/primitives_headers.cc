// Copyright dlock authors. Compiled, never linked or run: the public API of
// issue 24's primitives (dlock/semaphore.h, rw_lock.h, election.h,
// multi_lock.h, object_info.h and LockClient's new methods) used as service
// code uses it, so that the headers stay compilable, self-contained and
// warning-free (docs/design/primitives.md; what they do is checked by the
// conformance suite's C22 to C25 sections).
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/client.h"
#include "dlock/election.h"
#include "dlock/multi_lock.h"
#include "dlock/object_info.h"
#include "dlock/rw_lock.h"
#include "dlock/semaphore.h"

namespace dlock {
namespace {

static_assert(!std::is_copy_constructible_v<Permit>);
static_assert(std::is_nothrow_move_constructible_v<Permit>);
static_assert(!std::is_copy_constructible_v<Leadership>);
static_assert(std::is_nothrow_move_constructible_v<Leadership>);
static_assert(!std::is_copy_constructible_v<MultiHold>);
static_assert(std::is_nothrow_move_constructible_v<MultiHold>);

// At most N jobs at once, each writing to its slot's resource with the
// grant's token.
absl::Status RunBoundedJob(LockClient& client) {
  absl::StatusOr<std::unique_ptr<Semaphore>> sem =
      client.GetSemaphore("renders", 4);
  if (!sem.ok()) return sem.status();
  AcquireOptions options;
  options.wait = absl::Seconds(30);
  absl::StatusOr<Permit> permit = (*sem)->Acquire(2, options);
  if (!permit.ok()) return permit.status();
  for (int64_t slot : permit->slots()) {
    (void)slot;  // resource[slot].Write(..., permit->fencing_token())
  }
  absl::StatusOr<ObjectInfo> info = (*sem)->Inspect();
  if (info.ok() && info->limit != (*sem)->limit()) {
    return absl::InternalError("another N in force");
  }
  return permit->Release();
}

absl::Status ReadThenWrite(LockClient& client) {
  absl::StatusOr<std::unique_ptr<ReadWriteLock>> rw =
      client.GetReadWriteLock("catalog");
  if (!rw.ok()) return rw.status();
  {
    absl::StatusOr<Hold> read = (*rw)->AcquireRead();
    if (!read.ok()) return read.status();
    if (absl::Status s = read->Release(); !s.ok()) return s;
  }
  absl::StatusOr<Hold> write = (*rw)->TryAcquireWrite();
  if (!write.ok()) return write.status();
  return write->Release();
}

absl::Status LeadWhileYouCan(LockClient& client) {
  absl::StatusOr<std::unique_ptr<Election>> election =
      client.GetElection("scheduler");
  if (!election.ok()) return election.status();
  absl::StatusOr<LeaderInfo> seen = (*election)->Leader();
  if (!seen.ok()) return seen.status();
  absl::StatusOr<LeaderInfo> next =
      (*election)->WaitForChange(*seen, absl::Seconds(5));
  if (next.ok() && next->SameAs(*seen)) return absl::InternalError("same");
  absl::StatusOr<Leadership> leadership =
      (*election)->Campaign("10.0.0.7:8080");
  if (!leadership.ok()) return leadership.status();
  const uint64_t term = leadership->term();
  (void)term;  // every write of the leader carries it
  if (absl::Status s = leadership->Proclaim("10.0.0.7:8081"); !s.ok()) {
    return s;
  }
  return leadership->Resign();
}

absl::Status MoveFunds(LockClient& client) {
  absl::StatusOr<MultiHold> both =
      client.AcquireAll({"account/17", "account/4"}, AcquireOptions{});
  if (!both.ok()) return both.status();
  const uint64_t token = both->fencing_token("account/4");
  (void)token;
  if (both->state() != LockState::kHeld) return both->lost_reason();
  return both->Release();
}

absl::Status Operate(LockClient& client) {
  absl::StatusOr<std::vector<ObjectInfo>> semaphores =
      client.Admin().ListObjects(ObjectKind::kSemaphore);
  if (!semaphores.ok()) return semaphores.status();
  for (const ObjectInfo& o : *semaphores) {
    for (const HolderInfo& h : o.holders) {
      if (h.holder_live == false) {
        return client.Admin().ForceUnlockObject(o.kind, o.name,
                                                h.fencing_token);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

// Referenced so that -Wunused-function stays quiet about the examples.
std::vector<absl::Status (*)(LockClient&)> PrimitiveExamplesForCompileCheck() {
  return {&RunBoundedJob, &ReadThenWrite, &LeadWhileYouCan, &MoveFunds,
          &Operate};
}

}  // namespace dlock
