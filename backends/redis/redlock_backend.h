// Copyright dlock authors. The redlock:// backend (redlock_backend.cc has
// the algorithm, redlock_calls.cc the calls on a hold after its grant and
// the admin calls, redlock_objects.cc what elections and read-write locks
// change in them, redlock_rw.cc the read-write lock's own). Private to
// backends/redis.
#ifndef DLOCK_BACKENDS_REDIS_REDLOCK_BACKEND_H_
#define DLOCK_BACKENDS_REDIS_REDLOCK_BACKEND_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"
#include "redis_lock_ops.h"
#include "redis_master.h"
#include "redlock_hold.h"

namespace dlock::redis {

// One reply per master; nullopt where nothing was asked.
using Replies = std::vector<std::optional<absl::StatusOr<Reply>>>;

class RedlockBackend : public Backend {
 public:
  RedlockBackend(const std::vector<ConnectionConfig>& hosts, Keyspace keys,
                 Liveness liveness, Drift drift, absl::Duration retry_delay,
                 absl::Duration fallback_poll, const Clock& clock);

  ~RedlockBackend() override { Shutdown(); }

  // Starts every master at once; a client starts when a quorum answers and
  // keeps trying the others in the background.
  absl::Status Start();

  BackendTraits Traits() const override {
    return BackendTraits{
        .liveness_record = true,
        .fencing = FencingStrength::kServerMemory,
        .can_list = true,
        .keeps_after_release = true,
        .read_write_locks = true,
        .elections = true,
        // docs/design/primitives.md, "Redlock: not offered".
        .primitives_note =
            "semaphores: a count kept on independent masters can exceed N "
            "(with N=2 on three masters, holders of {m1,m2}, {m2,m3} and "
            "{m1,m3} each have a quorum)"};
  }

  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override;

  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override;

  absl::Status Renew(const RenewCall& call) override {
    return RenewMany({&call, 1})[0];
  }

  // Every due renewal in one pipeline per master, all masters at once.
  std::vector<absl::Status> RenewMany(
      absl::Span<const RenewCall> calls) override;

  // The lease a quorum vouches for and, with liveness, the time until which
  // the hold lives on enough masters that no quorum can grant it to another
  // (docs/redis.md, "Redlock and holder liveness").
  MonoTime HeldUntil(absl::string_view, absl::string_view,
                     const HoldRecord* record) override;

  // Every held lock's deadline on every master, one pipeline per master,
  // all at once. OK when enough masters answered that holds can live on
  // (`blocking_`); which holds do is HeldUntil's answer, since a hold counts
  // only the masters that granted it and kept its deadline without a gap.
  absl::Status RenewLiveness(absl::Duration) override;

  absl::StatusOr<LockInfo> Inspect(absl::string_view name) override;

  absl::StatusOr<std::vector<LockInfo>> List(absl::string_view prefix) override;

  absl::Status ForceUnlock(absl::string_view name) override;
  absl::Status ForceUnlockIfToken(absl::string_view name,
                                  uint64_t fencing_token) override;

  // Every master's, summed: each keeps its own copy of the locks.
  absl::StatusOr<ServerMemory> ServerMemoryUse() override;

  // Elections and a lock's readers (redlock_objects.cc, redlock_rw.cc): the
  // one-master scripts on every master, counted against the quorum as a
  // lock's calls are; a campaign or a read is a round of TryRound.
  // Semaphores: Backend's Unimplemented.
  absl::Status Proclaim(const ProclaimCall& call) override;
  std::unique_ptr<ObjectWatch> WatchObject(ObjectKind kind,
                                           absl::string_view name) override;
  absl::StatusOr<ObjectInfo> InspectObject(ObjectKind kind,
                                           absl::string_view name) override;
  absl::StatusOr<std::vector<ObjectInfo>> ListObjects(
      ObjectKind kind, absl::string_view prefix) override;
  absl::Status ForceUnlockObject(
      ObjectKind kind, absl::string_view name,
      std::optional<uint64_t> fencing_token) override;

  void Shutdown() override {
    for (const std::unique_ptr<Master>& m : masters_) m->Shutdown();
  }

 private:
  // What an acquisition's rounds leave besides the grant: the hold's
  // record, and whether a writer's intent of the owner may remain among
  // some master's readers (C23), which goes when the wait ends (C9).
  struct Rounds {
    std::shared_ptr<RedlockLockHold> record;
    bool intent_left = false;
  };

  // One attempt as the core sees it. A split vote (no owner holds a quorum,
  // this one included) decides nothing: its round is given back and, for a
  // single attempt (TryAcquire), run again after a random delay, a few
  // times, so that callers racing for a free lock do not all come away
  // empty-handed, each told that another holds it (C3). A waiting caller
  // runs again through the wait loop.
  absl::StatusOr<::dlock::Attempt> TryRound(const AcquireCall& call,
                                            bool will_wait, Rounds* rounds);

  // One round of the algorithm: the script on every master at once; on a
  // quorum within the lease, the agreed token; otherwise what the round
  // took is given back. `*split` says whether no owner holds a quorum.
  absl::StatusOr<::dlock::Attempt> OneRound(const AcquireCall& call,
                                            bool will_wait, Rounds* rounds,
                                            bool* split);

  // A round that did not win: what the refusals say (held by an owner
  // with a quorum, a master unheard, or a split vote: `*split`).
  ::dlock::Attempt Refused(
      const absl::flat_hash_map<std::string, std::vector<absl::Duration>>&
          refused_by,
      const absl::Status& error, bool* split) const;

  // A lock's writer that masters refused with the lock held by nobody
  // (kept, or read-held: C23) asks those masters write_acquire.lua, as one
  // master does, in a second step of the round (redlock_rw.cc); their
  // answers and reply times replace the first step's.
  void MeetReaders(const AcquireCall& call, bool will_wait, uint64_t proposed,
                   Replies& replies, std::vector<MonoTime>& replied,
                   Rounds* rounds);
  // The owner's writer intent goes from every master, waking the readers
  // it held back.
  void DropIntent(const AcquireCall& call);

  // The grant, its token known to a quorum; nullopt when fewer than a
  // quorum could be told. A re-entry (a quorum counts more than one hold)
  // keeps its token (C8); a fresh hold, even one the core took for a
  // re-entry, takes the largest counter of the masters that granted it.
  // `held` is this client's record of the hold, when it has one.
  struct Agreed {
    Acquired acquired;
    bool fresh = true;
  };
  std::optional<Agreed> AgreeOnToken(
      const AcquireCall& call, const RedlockHold* held,
      const std::vector<std::optional<Acquired>>& granted);

  // What each master that granted a won round vouches for: the lease from
  // the round's send time and, with liveness, the key it wrote in the same
  // step (its chain).
  void NoteGrants(RedlockLockHold& hold, MonoTime sent, absl::Duration lease,
                  const std::vector<std::optional<Acquired>>& granted,
                  const std::vector<MonoTime>& replied);

  bool KeepsLiveness() const { return liveness_.ttl_ms > 0; }

  // A round's script on one master, for a lock's writer or an election's
  // leadership (no head waiter's place: one per master would let three
  // campaigners split three masters until the places lapse), and what its
  // reply says; what gives the round back, and what writes the agreed
  // token (redlock_objects.cc).
  ScriptCall RoundScript(const Master& m, const AcquireCall& call,
                         bool will_wait, uint64_t proposed) const;
  absl::StatusOr<AcquireReply> ParseRound(
      const std::optional<absl::StatusOr<Reply>>& reply, size_t master,
      const AcquireCall& call) const;
  ScriptCall GiveBackScript(const Master& m, const AcquireCall& call) const;
  // A lock writer's release, with its readers' key: a writer that also
  // reads keeps its read (a downgrade, C23).
  ScriptCall WriterReleaseScript(const Master& m, absl::string_view name,
                                 absl::string_view owner, int64_t holds,
                                 absl::Duration keep_for) const;
  ScriptCall RaiseScript(const Master& m, const AcquireCall& call,
                         uint64_t token) const;

  // The answers of the masters to a call on a hold: how many did it, how
  // many said the owner holds nothing there, the first error.
  struct Tally {
    size_t done = 0;
    size_t gone = 0;
    absl::Status error;
    void Add(const absl::Status& s);
  };

  // What a quorum says of one holder, from the copies of the masters that
  // hold it for that owner (nullopt: fewer than a quorum): held until the
  // quorum-th longest lease left ends, live while live on `blocking_`.
  template <typename Info>
  std::optional<Info> QuorumHolder(std::vector<Info> copies) const {
    if (copies.size() < quorum_) return std::nullopt;
    std::sort(copies.begin(), copies.end(), [](const Info& a, const Info& b) {
      return a.remaining_lease > b.remaining_lease;
    });
    Info out = copies[quorum_ - 1];
    size_t live = 0;
    bool told = false;
    for (const Info& info : copies) {
      out.hold_count = std::max(out.hold_count, info.hold_count);
      out.fencing_token = std::max(out.fencing_token, info.fencing_token);
      out.since = std::min(out.since, info.since);
      // Unset: a holder with liveness off, whose hold only its lease ends.
      if (info.holder_live != std::optional<bool>(false)) ++live;
      told = told || info.holder_live.has_value();
    }
    // A waiter can take over once the holder is live on too few masters to
    // keep every quorum from granting it.
    out.holder_live =
        told ? std::optional<bool>(live >= blocking_) : std::nullopt;
    return out;
  }

  // Each master's reply parsed by `parse` (given the reply and the
  // master's endpoint), for the masters that answered; NoQuorum(what)
  // unless a quorum did. Every master must have been asked.
  template <typename T>
  absl::StatusOr<std::vector<T>> QuorumAnswers(
      const Replies& replies, absl::string_view what,
      absl::FunctionRef<absl::StatusOr<T>(const redisReply*, absl::string_view)>
          parse) const {
    std::vector<T> out;
    absl::Status error;
    for (size_t i = 0; i < replies.size(); ++i) {
      absl::StatusOr<T> one = Parse(replies[i], [&](const redisReply* r) {
        return parse(r, masters_[i]->endpoint());
      });
      if (!one.ok()) {
        if (error.ok()) error = one.status();
        continue;
      }
      out.push_back(*std::move(one));
    }
    if (out.size() < quorum_) return NoQuorum(what, out.size(), error);
    return out;
  }

  // The lock's writer as a quorum sees it, from each master's copy.
  LockInfo AgreedLock(absl::string_view name,
                      std::vector<LockInfo> copies) const;
  // The holders of one holders hash (a leadership, a lock's readers) that
  // a quorum of masters holds, from each master's reading (QuorumHolder per
  // owner), and the waiter a quorum carries.
  ObjectInfo AgreedHolders(ObjectKind kind, absl::string_view name,
                           const std::vector<ObjectInfo>& copies) const;
  // A lock with its writer and its readers as a quorum sees them
  // (redlock_rw.cc).
  absl::StatusOr<ObjectInfo> InspectLockObject(absl::string_view name);

  // The names `scan` finds on each master (SCAN), each once; Unavailable
  // unless a quorum answered (List, ListObjects).
  absl::StatusOr<std::vector<std::string>> ScanEveryMaster(
      absl::FunctionRef<absl::StatusOr<std::vector<std::string>>(Master&)>
          scan);

  // A force unlock's replies (ParseForceUnlockIfToken's) counted: removed
  // from a quorum, or with no token, done on a quorum.
  absl::Status ForceUnlockVerdict(const Replies& replies,
                                  absl::string_view name,
                                  std::optional<uint64_t> fencing_token) const;

  // Undoes a failed round on every master at once: where a master granted,
  // it takes back the one hold this round added (a fresh key goes, a
  // re-entry's count drops), never more, since the same owner may hold the
  // lock through another client or thread (C6). A master that did not
  // answer is left alone: whatever this round did there ends with its lease.
  void GiveBack(const AcquireCall& call,
                const std::vector<std::optional<Acquired>>& granted);

  // After a split vote: a random delay up to retry_delay, so that the
  // clients that split it do not split the next round too.
  absl::Duration RandomDelay() const;

  // Submits `make(master)` to every master, then awaits each: the round
  // takes as long as the slowest master (bounded by operation_timeout).
  // `make` gets the master and its index; nullopt asks that master nothing.
  // `replied`, if given, gets the time each master's reply was in.
  Replies OnEach(
      absl::FunctionRef<std::optional<ScriptCall>(const Master&, size_t)> make,
      std::vector<MonoTime>* replied = nullptr);

  template <typename ParseFn>
  static auto Parse(const std::optional<absl::StatusOr<Reply>>& reply,
                    ParseFn parse) -> decltype(parse(nullptr)) {
    if (!reply->ok()) return reply->status();
    return parse(reply->value().get());
  }

  absl::Status NoQuorum(absl::string_view what, size_t answered,
                        const absl::Status& error) const;

  const Clock& clock_;
  const Keyspace keys_;
  // This client's liveness TTL (ttl_ms 0: off).
  const Liveness liveness_;
  HeldLocks<RedlockLockHold> held_;  // with liveness: for the heartbeat
  const size_t quorum_;
  // How many masters must keep a hold so that no quorum of the others can
  // grant its lock: N − quorum + 1.
  const size_t blocking_;
  const Drift drift_;
  const absl::Duration retry_delay_;
  const absl::Duration fallback_poll_;
  WakeupHub releases_;  // every master's announcements wake the same waiters
  std::vector<std::unique_ptr<Master>> masters_;
};

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDLOCK_BACKEND_H_
