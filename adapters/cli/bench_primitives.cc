#include "bench_primitives.h"

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/election.h"
#include "dlock/rw_lock.h"
#include "dlock/semaphore.h"

namespace dlock::cli::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;
using Instant = SteadyClock::time_point;

// Before the leader steps down, the time the other campaigner's Campaign()
// gets to reach the backend and wait there. Were it not waiting yet, the
// hand-over measured would be shorter, never longer.
constexpr absl::Duration kCampaignSettle = absl::Milliseconds(50);

int64_t NanosSince(Instant from, Instant to) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(to - from)
      .count();
}

// Connects a client and hands it, with what `get` made of it, to `measure`;
// closes the client after.
template <typename Object>
absl::StatusOr<Uncontended> MeasureOn(
    const Settings& settings,
    const std::function<absl::StatusOr<std::unique_ptr<Object>>(LockClient&)>&
        get,
    int threads, const std::function<absl::StatusOr<Hold>(Object&)>& acquire) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = settings.connect({});
  if (!client.ok()) return client.status();
  absl::StatusOr<std::unique_ptr<Object>> object = get(**client);
  if (!object.ok()) return CloseAfter(**client, object.status());
  absl::StatusOr<Uncontended> out =
      MeasurePairs(settings, threads, [&](int) { return acquire(**object); });
  absl::Status closed = CloseAfter(**client, out.status());
  if (!closed.ok()) return closed;
  return out;
}

AcquireOptions PairOptions(const Settings& settings) {
  return {.wait = settings.unanswered_bound,
          .lease = kPairLease,
          .cancel = settings.stop};
}

// A Campaign() in a thread of its own, and when it returned.
struct Elected {
  absl::StatusOr<Leadership> leadership;
  Instant at;
};
std::future<Elected> CampaignInBackground(Election& election, std::string value,
                                          AcquireOptions options) {
  return std::async(std::launch::async, [&election, value, options] {
    absl::StatusOr<Leadership> won = election.Campaign(value, options);
    return Elected{std::move(won), SteadyClock::now()};
  });
}

// `leader` steps down while `next` campaigns; `leader` becomes `next`'s
// leadership. Returns the hand-over in nanoseconds.
absl::StatusOr<int64_t> ResignHandover(const Settings& settings, Election& next,
                                       Leadership& leader) {
  std::future<Elected> pending =
      CampaignInBackground(next, "next", PairOptions(settings));
  absl::SleepFor(kCampaignSettle);
  const Instant resigned_at = SteadyClock::now();
  const absl::Status resigned = leader.Resign();
  Elected elected = pending.get();
  if (!elected.leadership.ok()) return elected.leadership.status();
  leader = *std::move(elected.leadership);
  if (!resigned.ok()) return resigned;
  return NanosSince(resigned_at, elected.at);
}

// `leader` (of `stays`) steps down; `lapsing` is elected alone with `lease`
// and lets it run out, while `stays` campaigns again and is elected after
// it; `leader` becomes that leadership. Returns nanoseconds from the end of
// the lapsing lease, counted from the Campaign() call (the backend starts
// it later: at most a round trip too much) to `stays` elected.
absl::StatusOr<int64_t> LapseHandover(const Settings& settings, Election& stays,
                                      Election& lapsing, Leadership& leader,
                                      absl::Duration lease) {
  if (absl::Status s = leader.Resign(); !s.ok()) return s;
  const Instant asked_at = SteadyClock::now();
  absl::StatusOr<Leadership> lapsed =
      lapsing.Campaign("lapsing", {.wait = settings.unanswered_bound,
                                   .lease = lease,
                                   .cancel = settings.stop});
  if (!lapsed.ok()) return lapsed.status();
  AcquireOptions waiting = PairOptions(settings);
  waiting.wait += lease;
  std::future<Elected> pending = CampaignInBackground(stays, "stays", waiting);
  // Neither renewed nor resigned: as a leader that hung or died.
  const absl::Status kept = lapsed->hold().KeepUntilLeaseEnd();
  Elected elected = pending.get();
  if (!elected.leadership.ok()) return elected.leadership.status();
  leader = *std::move(elected.leadership);
  if (!kept.ok()) return kept;
  return NanosSince(asked_at + absl::ToChronoNanoseconds(lease), elected.at);
}

// The resign hand-overs (the first, a warm-up, not counted) then the
// lapses, alternating the leader between the two elections.
absl::StatusOr<Handover> MeasureHandovers(
    const Settings& settings, const std::vector<std::unique_ptr<Election>>& e,
    int resigns, int lapses, absl::Duration lease) {
  absl::StatusOr<Leadership> first =
      e[0]->Campaign("first", PairOptions(settings));
  if (!first.ok()) return first.status();
  Leadership leader = *std::move(first);
  LatencyHistogram resign_ns, lapse_ns;
  int leads = 0;
  for (int i = 0; i <= resigns; ++i) {
    leads = 1 - leads;
    absl::StatusOr<int64_t> took = ResignHandover(settings, *e[leads], leader);
    if (!took.ok()) return took.status();
    if (i > 0) resign_ns.Add(*took);
  }
  for (int i = 0; i < lapses; ++i) {
    absl::StatusOr<int64_t> took =
        LapseHandover(settings, *e[leads], *e[1 - leads], leader, lease);
    if (!took.ok()) return took.status();
    lapse_ns.Add(*took);
  }
  if (absl::Status s = leader.Resign(); !s.ok()) return s;
  return Handover{.resigns = resigns,
                  .resign_us = resign_ns.Get(),
                  .lapses = lapses,
                  .lease = lease,
                  .lapse_us = lapse_ns.Get()};
}

}  // namespace

absl::StatusOr<Offered> PrimitivesOffered(const Settings& settings) {
  absl::StatusOr<std::unique_ptr<LockClient>> client = settings.connect({});
  if (!client.ok()) return client.status();
  const BackendTraits& traits = (*client)->traits();
  Offered out{.semaphores = traits.semaphores,
              .read_write_locks = traits.read_write_locks,
              .elections = traits.elections,
              .note = traits.primitives_note};
  if (absl::Status s = (*client)->Close(); !s.ok()) return s;
  return out;
}

absl::StatusOr<Uncontended> RunSemaphore(const Settings& settings, int threads,
                                         int64_t permits) {
  const std::string name =
      absl::StrCat(settings.name_prefix, "s", threads, "-", permits);
  return MeasureOn<Semaphore>(
      settings, [&](LockClient& c) { return c.GetSemaphore(name, permits); },
      threads,
      [&](Semaphore& s) -> absl::StatusOr<Hold> {
        absl::StatusOr<Permit> permit = s.Acquire(1, PairOptions(settings));
        if (!permit.ok()) return permit.status();
        return std::move(permit->hold());
      });
}

absl::StatusOr<Uncontended> RunReadWrite(const Settings& settings, int threads,
                                         bool exclusive) {
  const std::string name =
      absl::StrCat(settings.name_prefix, exclusive ? "w" : "r", threads);
  return MeasureOn<ReadWriteLock>(
      settings, [&](LockClient& c) { return c.GetReadWriteLock(name); },
      threads,
      [&](ReadWriteLock& rw) {
        return exclusive ? rw.AcquireWrite(PairOptions(settings))
                         : rw.AcquireRead(PairOptions(settings));
      });
}

absl::StatusOr<Handover> RunElection(const Settings& settings, int resigns,
                                     int lapses, absl::Duration lease) {
  std::vector<std::unique_ptr<LockClient>> clients;
  std::vector<std::unique_ptr<Election>> elections;
  auto close_all = [&](absl::Status run) {
    elections.clear();
    for (auto& c : clients) run = CloseAfter(*c, run);
    return run;
  };
  const std::string name = absl::StrCat(settings.name_prefix, "e");
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::unique_ptr<LockClient>> client = settings.connect({});
    if (!client.ok()) return close_all(client.status());
    clients.push_back(*std::move(client));
    absl::StatusOr<std::unique_ptr<Election>> e =
        clients.back()->GetElection(name);
    if (!e.ok()) return close_all(e.status());
    elections.push_back(*std::move(e));
  }
  absl::StatusOr<Handover> out =
      MeasureHandovers(settings, elections, resigns, lapses, lease);
  absl::Status closed =
      close_all(settings.stop.IsCancelled() ? Interrupted() : out.status());
  if (!closed.ok()) return closed;
  return out;
}

}  // namespace dlock::cli::bench
