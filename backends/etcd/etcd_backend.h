// Copyright dlock authors. The etcd:// backend: a lock is one key
// (etcd_layout.h), created by a transaction that compares its create
// revision with 0 (absent) and puts it on a lease of the hold's own,
// granted for the hold's lease. etcd's lease is the only clock etcd has, so
// it is the hold's lease (C2): a renewal is a keepalive (then a read of the
// key, which a force unlock may have deleted with the lease left), and a
// holder that stops renewing (or dies) loses the key when etcd expires the
// lease. The key's create revision is the fencing token (C8): it only
// grows, across leader changes and restarts, since every write goes
// through Raft.
//
// A lease carries one generation of one key at a time (EtcdHold). The
// release of a hold untouched since its create deletes its key by a
// transaction guarded by its create and mod revisions and gives the lease
// back to the spares, to carry the client's next hold. So an end of a hold
// that another call read (a force unlock, a release by owner token, a
// takeover) is a delete guarded by the revisions read, and the lease is
// revoked only after that delete succeeded (EndHold): a lease read before a
// release may carry another hold since. Any other end revokes the hold's
// own lease, which deletes its key in the same step. A release retried
// after a lost reply deletes or revokes nothing but its own hold, never a
// newer hold of the same owner (etcd #22082). Changes to a key that stays
// (re-entry, a partial release, a lock kept after its release) are
// transactions that compare its create and mod revisions and carry a write
// id, so a retry after a lost reply is never applied twice and recognizes
// its first attempt when that committed (etcd_client.h, RETRYING WRITES).
//
// Waiters wait on one watch per client over the namespace: a deletion (or
// a lock kept after release) wakes the waiters of that name, and the
// fallback poll bounds a lost event. Waiting is not FIFO. The watch starts
// with the client's first wait (or observer): a client that never waits is
// sent none of its namespace's writes.
//
// Holder liveness (etcd_liveness.h): a hold names the liveness keys of the
// clients it is held through, and a waiter that finds them all gone deletes
// it in one transaction guarded by its mod revision (TakeOver), whatever its
// lease.
#ifndef DLOCK_BACKENDS_ETCD_ETCD_BACKEND_H_
#define DLOCK_BACKENDS_ETCD_ETCD_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"
#include "etcd_client.h"
#include "etcd_hold.h"
#include "etcd_layout.h"
#include "etcd_liveness.h"
#include "etcd_spares.h"

namespace dlock::etcd {

struct BackendSettings {
  ClientOptions client;
  std::string lock_namespace;
  absl::Duration fallback_poll;
  const Clock* clock;
  // The core's (BackendConfig); liveness_ttl InfiniteDuration: off.
  std::string liveness_id;
  absl::Duration liveness_ttl = absl::InfiniteDuration();
};

class EtcdBackend : public Backend {
 public:
  // Reads once from the cluster (Unavailable when no member answers).
  static absl::StatusOr<std::unique_ptr<Backend>> Create(
      BackendSettings settings);
  ~EtcdBackend() override;

  BackendTraits Traits() const override;
  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override;
  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override;
  absl::Status Renew(const RenewCall& call) override;
  // Keeps each hold's lease alive, then reads the keys of the holds
  // renewed, a Txn of Ranges for up to kReadsPerTxn: a key deleted while
  // its lease lives on (a force unlock that did not revoke it, a key
  // deleted by hand) is a hold lost (NotOwnerError).
  std::vector<absl::Status> RenewMany(
      absl::Span<const RenewCall> calls) override;
  absl::StatusOr<LockInfo> Inspect(absl::string_view name) override;
  absl::StatusOr<std::vector<LockInfo>> List(absl::string_view prefix) override;
  absl::Status ForceUnlock(absl::string_view name) override;
  absl::Status ForceUnlockIfToken(absl::string_view name,
                                  uint64_t fencing_token) override;
  absl::Status RenewLiveness(absl::Duration ttl) override;
  // The database size in use that the member answering reports
  // (Maintenance.Status dbSizeInUse): bbolt pages, so it moves in steps.
  absl::StatusOr<ServerMemory> ServerMemoryUse() override;
  // etcd_election.cc: an election's leadership is the lock writer of the
  // election's own key (ObjectName), whose value carries the leader's.
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
  void Shutdown() override;

 private:
  // A lock kept after its release that a waiter saw, unchanged since: its
  // keep ends for this waiter keep_ms after it saw it (it was written no
  // later), whatever etcd's lease, which ends up to a second later.
  struct KeptSeen {
    int64_t mod_revision = 0;
    MonoTime seen;
  };
  // One acquisition's state across its attempts.
  struct Acquiring {
    std::optional<LeaseState> spare;  // granted, not yet on the key
    // A create naming the spare went unanswered: it may carry the key.
    bool spare_maybe_used = false;
    std::shared_ptr<EtcdHold> record;
    MonoTime sent = MonoTime::InfiniteFuture();  // of the winning lease
    KeptSeen kept;
    // The liveness record the winning attempt named.
    std::optional<ClientLiveness::Record> live;
    // A semaphore's: the slots granted, and the lease of the head waiter's
    // place this acquisition put (0: none).
    std::vector<int64_t> slots;
    int64_t place_lease = 0;
    // A lock's writer: the mod revision of its own intent once the last
    // reader left (0: it expects none).
    int64_t intent_mod = 0;
  };
  // The owner's hold after a re-entry.
  struct Reentered {
    int64_t holds = 0;
    LeaseState lease;
  };

  // Rounds of read-then-compare before a call gives up on a key that
  // changes under it every time (only writers of one owner token race so).
  static constexpr int kRounds = 8;
  static absl::Status Contended(absl::string_view name, absl::string_view what);

  EtcdBackend(BackendSettings settings, std::unique_ptr<Client> client);
  MonoTime Now() const { return clock_.Now(); }
  std::string NewWriteId();
  void OnWatch(const WatchUpdate& update);
  // Starts the namespace's watch unless it runs (or the backend was shut
  // down). Its start wakes every waiter (kStarted, OnWatch), so a write
  // between a waiter's attempt and the watch is not missed: the waiter
  // looks again. Idle clients skip it: an uncontended pair would cost
  // etcd two more events to send, and this client two stream messages.
  void StartWatch() ABSL_LOCKS_EXCLUDED(watch_mu_);
  // `attempt`, after which the caller waits unless it won: the watch
  // starts first.
  absl::StatusOr<Attempt> Watched(absl::StatusOr<Attempt> attempt);

  // etcd_leases.cc: the calls on keys and leases the operations share.
  absl::StatusOr<std::optional<mvccpb::KeyValue>> Get(const std::string& key);
  absl::StatusOr<LeaseState> GrantLease(absl::Duration lease);
  // NotFound when etcd no longer knows the lease.
  absl::StatusOr<LeaseState> KeepAlive(int64_t lease);
  // What etcd knows of the lease a key lives on; NotFound when it is gone.
  absl::StatusOr<LeaseState> LeaseOf(const mvccpb::KeyValue& kv);
  void RevokeQuietly(int64_t lease);
  // Ends the hold `kv` another call read (a force unlock, a stale hold of a
  // thread): deletes its key while it is that write, then revokes its
  // lease. False when the key changed or went meanwhile (read it again).
  // Never revokes a lease it did not see the key deleted from: a released
  // hold's lease carries the client's next hold (etcd_hold.h).
  absl::StatusOr<bool> EndHold(const mvccpb::KeyValue& kv);
  // Every key that starts with `prefix`, read in one revision.
  absl::StatusOr<etcdserverpb::RangeResponse> RangeOf(const std::string& prefix,
                                                      bool keys_only = false);
  // Puts `value` over `kv` if the key is still that write of it (its create
  // and mod revisions), on `lease` (0: the key's own). False when the key
  // changed meanwhile.
  absl::StatusOr<bool> Overwrite(const std::string& key,
                                 const mvccpb::KeyValue& kv, HoldValue value,
                                 int64_t lease);

  // etcd_backend.cc: a lock's writer, on the key of call.name (an
  // election's and a permit holder's calls name their own key, OnKey).
  absl::StatusOr<Grant> AcquireWriter(const AcquireCall& call);
  // The lease of a known hold that one keepalive renews; nullopt when the
  // renewal must read the key (RenewByReading).
  static std::optional<int64_t> LeaseToKeepAlive(const RenewCall& call);
  // The renewal of `call` given its keepalive's answer `kept`.
  absl::Status AfterKeepAlive(const RenewCall& call, EtcdHold* record,
                              const absl::StatusOr<LeaseState>& kept);
  // Ranges in one Txn, at most: etcd's default --max-txn-ops.
  static constexpr int kReadsPerTxn = 128;
  // Turns the renewals `renewed` of `calls`, whose keepalives succeeded,
  // into losses where their key is gone or of another generation. `keyed`
  // are the same calls on their holds' own keys (OnKey), which name them.
  void ConfirmKeys(absl::Span<const RenewCall> calls,
                   absl::Span<const RenewCall> keyed,
                   absl::Span<const size_t> renewed,
                   std::vector<absl::Status>& results);
  // etcd_leases.cc, shared by every recipe's acquisition. Before an
  // attempt: a spare lease ready, and the liveness record the grant names.
  absl::Status ReadyAttempt(absl::Duration lease, Acquiring& a);
  // Sends a Txn that creates the hold's key on the spare lease (idempotent).
  absl::StatusOr<etcdserverpb::TxnResponse> SendCreate(
      const etcdserverpb::TxnRequest& txn, Acquiring& a);
  // The hold, when the create Txn `put` (its failure reading the key) put
  // the key on the spare lease, also in a first attempt whose reply was
  // lost; `token`: the hold's, when not the key's create revision.
  std::optional<Attempt> Won(const etcdserverpb::TxnResponse& put, Acquiring& a,
                             uint64_t token = 0);
  // A hold on a key of the owner's own (a reader's, a permit holder's):
  // re-entry of the known hold, else attempts woken on `wait_on`.
  absl::StatusOr<Grant> AcquireOwnKey(
      const AcquireCall& call, absl::string_view wait_on,
      absl::FunctionRef<absl::StatusOr<Attempt>(const AcquireCall&, Acquiring&)>
          attempt);
  // An acquisition's spare lease, put on no key, after its wait.
  void PutSpareBack(absl::Duration lease, Acquiring& a);
  // The grant of a won acquisition, counted from what it may count from.
  Grant Granted(const AcquireCall& call, Acquiring& a, Grant grant);
  absl::StatusOr<Attempt> TryOnce(const AcquireCall& call,
                                  const std::string& key, Acquiring& a);
  // How much older than a grant the confirmations it counts from may be
  // before a keepalive is sent after it (Acquire).
  absl::Duration Slack(absl::Duration lease) const;
  // From when the core may count a fresh hold on `record`'s lease, last
  // confirmed at `confirmed`, granted by an attempt sent at `sent`.
  MonoTime HoldCountsFrom(EtcdHold& record, MonoTime confirmed, MonoTime sent,
                          absl::Duration slack);
  HoldValue FreshHold(const AcquireCall& call,
                      const std::optional<ClientLiveness::Record>& live);
  // The hold `kv` of another owner, read at `read_revision`: when the
  // liveness keys of all the clients it names are gone, deletes it and
  // answers true (also when it is over anyway). A waiter is woken when one
  // of them goes.
  absl::StatusOr<bool> TakeOver(const AcquireCall& call, const std::string& key,
                                const mvccpb::KeyValue& kv,
                                const HoldValue& held, int64_t read_revision);
  absl::Status ReadySpare(absl::Duration lease, Acquiring& a);
  // The owner holds `kv` through another client (C6): one hold more.
  absl::StatusOr<Attempt> Reenter(const AcquireCall& call,
                                  const std::string& key,
                                  const mvccpb::KeyValue& kv,
                                  const HoldValue& held, Acquiring& a);
  // A lock kept after its release, seen by a waiter: how long its keep has
  // left, or, once it is over, revokes its lease and answers zero.
  absl::StatusOr<absl::Duration> KeptLeft(const mvccpb::KeyValue& kv,
                                          const HoldValue& value, Acquiring& a);
  // One more hold on `kv`, the owner's (C5): the count up by one, the lease
  // at least call.lease, protected by `live` too. nullopt when the key
  // changed meanwhile.
  absl::StatusOr<std::optional<Reentered>> AddHold(
      const AcquireCall& call, const std::string& key,
      const mvccpb::KeyValue& kv, HoldValue value, const EtcdHold* record,
      const std::optional<ClientLiveness::Record>& live);
  // Re-entry of the hold the core handed back; nullopt when that hold is
  // over (the acquisition is then a fresh one).
  std::optional<absl::StatusOr<Grant>> ReenterKnown(const AcquireCall& call,
                                                    const std::string& key,
                                                    EtcdHold& record);
  // The renewal after the record's lease could not simply be kept alive.
  absl::Status RenewByReading(const RenewCall& call, EtcdHold* record);
  // Moves the hold `kv` to a new lease of `lease`, the largest asked.
  absl::StatusOr<std::optional<LeaseState>> MoveToLongerLease(
      const std::string& key, const mvccpb::KeyValue& kv, HoldValue value,
      absl::Duration lease);

  // etcd_semaphore.cc (C22)
  absl::StatusOr<Grant> AcquirePermits(const AcquireCall& call);
  // `holder`: the call on the owner's own grant key (OnKey).
  absl::StatusOr<Attempt> TryPermitsOnce(const AcquireCall& call,
                                         const AcquireCall& holder,
                                         Acquiring& a);
  // Keeps (or puts) the head waiter's place for `call`'s permits.
  absl::Status KeepPlace(const AcquireCall& call, const mvccpb::KeyValue* place,
                         Acquiring& a);
  absl::StatusOr<ObjectInfo> InspectSemaphore(absl::string_view name);
  absl::StatusOr<std::vector<ObjectInfo>> ListSemaphores(
      absl::string_view prefix);
  absl::Status ForceUnlockSemaphore(absl::string_view name,
                                    std::optional<uint64_t> fencing_token);

  // etcd_rwlock.cc (C23)
  absl::StatusOr<Grant> AcquireRead(const AcquireCall& call);
  // `reader`: the call on the owner's own reader key (OnKey). One Txn
  // grants a reader of a lock that no writer holds and no intent waits on.
  absl::StatusOr<Attempt> TryReadOnce(const AcquireCall& reader, Acquiring& a);
  // The owner's read `mine`, found by a refused grant: re-entered through
  // another client (C6); a thread's the core gave up, ended (nullopt).
  absl::StatusOr<std::optional<Attempt>> OwnReadFound(
      const AcquireCall& reader, const std::string& key,
      const mvccpb::KeyValue& mine, Acquiring& a);
  // The read of the owner whose write `writer` is (the writer's token);
  // nullopt when that write changed meanwhile.
  absl::StatusOr<std::optional<Attempt>> ReadOwnWrite(
      const AcquireCall& reader, const std::string& key,
      const mvccpb::KeyValue& writer, Acquiring& a);
  // A writer's create also asks that no reader holds the lock and that no
  // other writer's intent waits (a.intent_mod: its own).
  void AddNoReaders(absl::string_view lock, const Acquiring& a,
                    etcdserverpb::TxnRequest& txn);
  // A writer's create failed with the lock's key absent: readers hold it
  // (the Attempt to wait, after putting or keeping the intent), or nothing
  // does any longer (nullopt: try again now). UpgradeRefused when the
  // owner reads it.
  absl::StatusOr<std::optional<Attempt>> ReadersInTheWay(
      const AcquireCall& call, Acquiring& a);
  absl::Status PutIntent(const AcquireCall& call, Acquiring& a);
  // The writer, the readers and the intent.
  absl::StatusOr<ObjectInfo> InspectLock(absl::string_view name);
  // The names of the locks held by a writer, kept, or read (etcd_election.cc),
  // sorted.
  absl::StatusOr<std::vector<std::string>> LockNames(absl::string_view prefix);
  // The writer and every reader (with the token: those that carry it).
  absl::Status ForceUnlockLock(absl::string_view name,
                               std::optional<uint64_t> fencing_token);
  // Ends every hold's key under `prefix` but `except` (with
  // `fencing_token`: those that carry it), by EndHold; whether any was.
  absl::StatusOr<bool> EndHoldsUnder(const std::string& prefix,
                                     const std::string& except,
                                     std::optional<uint64_t> fencing_token);

  // etcd_release.cc
  absl::StatusOr<int64_t> ReleaseWriter(const ReleaseCall& call);
  // The release of a whole hold the core handed back; nullopt when the key
  // must be read (another generation, or a lease etcd no longer knows).
  std::optional<absl::StatusOr<int64_t>> ReleaseWhole(const ReleaseCall& call,
                                                      const std::string& key,
                                                      const EtcdHold& record);
  absl::StatusOr<std::optional<int64_t>> ReleaseOnce(const ReleaseCall& call,
                                                     const std::string& key,
                                                     const EtcdHold* record);
  absl::StatusOr<bool> Keep(const ReleaseCall& call, const std::string& key,
                            const mvccpb::KeyValue& kv);
  // `live`: the liveness ids among those the hold names whose key exists.
  absl::StatusOr<LockInfo> Describe(
      absl::string_view name, const mvccpb::KeyValue& kv,
      const absl::flat_hash_set<std::string>& live);
  // A held key as Inspect and List show it, with an election's value.
  struct Described {
    LockInfo info;  // named by the key's object name (ObjectName)
    std::string value;
  };
  // Every held key whose object name starts with `object_prefix`.
  absl::StatusOr<std::vector<Described>> DescribeFrom(
      absl::string_view object_prefix);
  // Ends the hold of the lock's key (if it has `token`, when given), by
  // EndHold.
  absl::Status EndHolder(absl::string_view name, std::optional<uint64_t> token);

  const BackendSettings settings_;
  const Clock& clock_;
  const Layout layout_;
  std::unique_ptr<Client> client_;
  WakeupHub hub_;
  std::atomic<bool> watching_{false};  // set once watch_ is
  absl::Mutex watch_mu_;
  bool shut_down_ ABSL_GUARDED_BY(watch_mu_) = false;
  std::unique_ptr<Watch> watch_ ABSL_GUARDED_BY(watch_mu_);
  ClientLiveness liveness_;
  SpareLeases spares_;
  const std::string write_id_prefix_;
  std::atomic<uint64_t> writes_{0};
};

}  // namespace dlock::etcd

#endif  // DLOCK_BACKENDS_ETCD_ETCD_BACKEND_H_
