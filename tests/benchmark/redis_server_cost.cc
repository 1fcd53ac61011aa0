#include "redis_server_cost.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "bench_util.h"

namespace dlock::bench {
namespace {

constexpr int kThreads = 16;

// How a contender takes its key (each thread has one of its own).
enum class Acquire {
  kSetNxPx,
  kTimeScript,
  kTimeTransaction,
  kCopyTransaction,
};

struct Contender {
  Acquire acquire;
  // What INFO commandstats counts: the commands the client sends itself
  // (a script's time includes the commands it runs, EXEC's those it runs),
  // and how many of them a pair sends.
  std::vector<std::string> top_level;
  int calls_per_pair;
  // The release: KEYS[1] the lock, ARGV[1] the owner.
  const char* release;
};

// An owner as long as dlock's: a client id and a thread.
constexpr char kOwner[] = "9f2c4e1a7b3d4c5e8f60718293a4b5c6:140213";

constexpr char kReleaseString[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('DEL', KEYS[1]) end return 0";
constexpr char kReleaseHash[] =
    "if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then "
    "return redis.call('DEL', KEYS[1]) end return 0";
constexpr char kTimeScript[] =
    "local t = redis.call('TIME') "
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', 10000) then "
    "return t end return 0";

// The contenders beside dlock, in ServerCost's order.
const std::vector<Contender>& Contenders() {
  static const auto* const kContenders = new std::vector<Contender>{
      {Acquire::kSetNxPx, {"set", "evalsha"}, 2, kReleaseString},
      {Acquire::kTimeScript, {"evalsha"}, 2, kReleaseString},
      {Acquire::kTimeTransaction,
       {"multi", "exec", "evalsha"},
       3,
       kReleaseString},
      {Acquire::kCopyTransaction,
       {"multi", "exec", "evalsha"},
       3,
       kReleaseHash},
  };
  return *kContenders;
}

// A command's words as hiredis's *Argv calls take them.
struct Argv {
  explicit Argv(const std::vector<std::string>& words) {
    for (const std::string& w : words) {
      args.push_back(w.data());
      lengths.push_back(w.size());
    }
  }
  int count() const { return static_cast<int>(args.size()); }
  std::vector<const char*> args;
  std::vector<size_t> lengths;
};

redisReply* Call(redisContext* ctx, const std::vector<std::string>& words) {
  Argv argv(words);
  return static_cast<redisReply*>(redisCommandArgv(
      ctx, argv.count(), argv.args.data(), argv.lengths.data()));
}

// Sends MULTI, `commands`, EXEC in one write and returns EXEC's reply
// (nullptr when the connection failed). The caller frees it.
redisReply* Transaction(redisContext* ctx,
                        const std::vector<std::vector<std::string>>& commands) {
  redisAppendCommand(ctx, "MULTI");
  for (const std::vector<std::string>& words : commands) {
    Argv argv(words);
    redisAppendCommandArgv(ctx, argv.count(), argv.args.data(),
                           argv.lengths.data());
  }
  redisAppendCommand(ctx, "EXEC");
  void* reply = nullptr;
  for (size_t i = 0; i < commands.size() + 2; ++i) {
    if (reply != nullptr) freeReplyObject(reply);
    reply = nullptr;
    // After a failure the context stays in error: nothing more is read.
    if (redisGetReply(ctx, &reply) != REDIS_OK) return nullptr;
  }
  return static_cast<redisReply*>(reply);
}

// Whether the acquire took the thread's free key, as each design tells it.
bool Taken(Acquire acquire, const redisReply* r) {
  switch (acquire) {
    case Acquire::kSetNxPx:
      return r->type == REDIS_REPLY_STATUS;  // OK
    case Acquire::kTimeScript:
      return r->type == REDIS_REPLY_ARRAY;  // TIME's
    case Acquire::kTimeTransaction:         // TIME's, then SET's OK
      return r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
             r->element[1]->type == REDIS_REPLY_STATUS;
    case Acquire::kCopyTransaction:  // the counter, HSET's, COPY's 1, TTL set
      return r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
             r->element[0]->type == REDIS_REPLY_INTEGER &&
             r->element[2]->type == REDIS_REPLY_INTEGER &&
             r->element[2]->integer == 1 &&
             r->element[3]->type == REDIS_REPLY_INTEGER &&
             r->element[3]->integer == 1;
  }
  return false;
}

redisReply* AcquireOnce(redisContext* ctx, Acquire acquire,
                        const std::string& key, const std::string& script_sha) {
  switch (acquire) {
    case Acquire::kSetNxPx:
      return Call(ctx, {"SET", key, "id", "NX", "PX", "10000"});
    case Acquire::kTimeScript:
      return Call(ctx, {"EVALSHA", script_sha, "1", key, "id"});
    case Acquire::kTimeTransaction:
      return Transaction(ctx,
                         {{"TIME"}, {"SET", key, "id", "NX", "PX", "10000"}});
    case Acquire::kCopyTransaction: {
      // The template shares the lock's hash tag, so its slot; its counter
      // only grows, and COPY writes only when the lock is absent. It never
      // has a TTL, so PEXPIRE NX gives the fresh copy its lease.
      // The fields a hold keeps (C5, C11, C19), the owner as long as
      // dlock's (a client id and a thread).
      const std::string templ = absl::StrCat(key, ":template");
      return Transaction(ctx, {{"HINCRBY", templ, "token", "1"},
                               {"HSET", templ, "owner", kOwner, "holds", "1",
                                "lease", "10000", "alive", "-1", "waited", "0"},
                               {"COPY", templ, key},
                               {"PEXPIRE", key, "10000", "NX"}});
    }
  }
  return nullptr;
}

// One thread's pairs on `key` until `end`; false when one failed.
bool PairsUntil(int port, Acquire acquire, const std::string& key,
                const std::string& script_sha, const std::string& release_sha,
                absl::Time end) {
  redisContext* ctx = redisConnect("127.0.0.1", port);
  bool ok = ctx != nullptr && ctx->err == 0;
  while (ok && absl::Now() < end) {
    redisReply* taken = AcquireOnce(ctx, acquire, key, script_sha);
    ok = taken != nullptr && Taken(acquire, taken);
    if (taken != nullptr) freeReplyObject(taken);
    redisReply* released =
        Call(ctx, {"EVALSHA", release_sha, "1", key,
                   acquire == Acquire::kCopyTransaction ? kOwner : "id"});
    ok = ok && released != nullptr && released->type == REDIS_REPLY_INTEGER &&
         released->integer == 1;
    if (released != nullptr) freeReplyObject(released);
  }
  if (ctx != nullptr) redisFree(ctx);
  return ok;
}

absl::Status ContenderPairs(int port, absl::Duration slice,
                            const Contender& contender) {
  absl::StatusOr<std::string> release_sha =
      RedisCommandText(port, {"SCRIPT", "LOAD", contender.release});
  if (!release_sha.ok()) return release_sha.status();
  absl::StatusOr<std::string> script_sha =
      RedisCommandText(port, {"SCRIPT", "LOAD", kTimeScript});
  if (!script_sha.ok()) return script_sha.status();
  std::atomic<bool> failed{false};
  std::vector<std::thread> workers;
  const absl::Time end = absl::Now() + slice;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      const std::string key = absl::StrCat("{floor:", t, "}");
      if (!PairsUntil(port, contender.acquire, key, *script_sha, *release_sha,
                      end)) {
        failed = true;
      }
    });
  }
  for (std::thread& w : workers) w.join();
  if (failed) {
    return absl::InternalError(
        "an acquire+release pair failed: the key was not taken or not "
        "released, or the server refused a command");
  }
  return absl::OkStatus();
}

// What `run` cost the server per pair: the time INFO commandstats counted
// for `top_level` over their count, times the calls a pair sends.
absl::StatusOr<double> ServerMicrosPerPair(
    int port, const std::vector<std::string>& top_level, int calls_per_pair,
    const std::function<absl::Status()>& run) {
  if (absl::StatusOr<std::string> s =
          RedisCommandText(port, {"CONFIG", "RESETSTAT"});
      !s.ok()) {
    return s.status();
  }
  if (absl::Status s = run(); !s.ok()) return s;
  absl::StatusOr<std::string> info =
      RedisCommandText(port, {"INFO", "commandstats"});
  if (!info.ok()) return info.status();
  int64_t calls = 0;
  int64_t usec = 0;
  for (const std::string& command : top_level) {
    const std::string field = absl::StrCat("cmdstat_", command, ":calls=");
    const size_t at = info->find(field);
    if (at == std::string::npos) continue;
    calls += std::strtoll(info->c_str() + at + field.size(), nullptr, 10);
    const size_t u = info->find("usec=", at);
    usec += std::strtoll(info->c_str() + u + 5, nullptr, 10);
  }
  if (calls == 0) return absl::InternalError("no calls counted");
  return calls_per_pair * static_cast<double>(usec) /
         static_cast<double>(calls);
}

// Of at least one value.
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

absl::StatusOr<std::string> RedisCommandText(
    int port, const std::vector<std::string>& argv) {
  redisContext* ctx = redisConnect("127.0.0.1", port);
  if (ctx == nullptr || ctx->err != 0) {
    if (ctx != nullptr) redisFree(ctx);
    return absl::UnavailableError(
        absl::StrCat("cannot connect to the redis-server on port ", port));
  }
  redisReply* reply = Call(ctx, argv);
  redisFree(ctx);
  if (reply == nullptr) return absl::UnavailableError("no reply");
  if (reply->type == REDIS_REPLY_ERROR) {
    absl::Status refused = absl::InternalError(
        absl::StrCat("the redis-server refused ", argv.empty() ? "" : argv[0],
                     ": ", absl::string_view(reply->str, reply->len)));
    freeReplyObject(reply);
    return refused;
  }
  std::string text = reply->type == REDIS_REPLY_INTEGER
                         ? absl::StrCat(reply->integer)
                         : std::string(reply->str ? reply->str : "",
                                       reply->str ? reply->len : 0);
  freeReplyObject(reply);
  return text;
}

absl::StatusOr<ServerCost> ServerCostOf(int port, const std::string& uri,
                                        absl::Duration slice, int rounds) {
  const std::vector<Contender>& contenders = Contenders();
  std::vector<double> ours;
  std::vector<std::vector<double>> theirs(contenders.size());
  for (int r = 0; r < rounds; ++r) {
    absl::StatusOr<double> d =
        ServerMicrosPerPair(port, {"fcall", "evalsha", "eval"}, 2, [&] {
          return UncontendedPairsPerSecond(uri, kThreads, slice).status();
        });
    if (!d.ok()) return d.status();
    ours.push_back(*d);
    for (size_t c = 0; c < contenders.size(); ++c) {
      absl::StatusOr<double> p = ServerMicrosPerPair(
          port, contenders[c].top_level, contenders[c].calls_per_pair,
          [&] { return ContenderPairs(port, slice, contenders[c]); });
      if (!p.ok()) return p.status();
      theirs[c].push_back(*p);
    }
  }
  return ServerCost{.dlock = Median(ours),
                    .peer = Median(theirs[0]),
                    .time_script = Median(theirs[1]),
                    .time_transaction = Median(theirs[2]),
                    .copy_transaction = Median(theirs[3])};
}

}  // namespace dlock::bench
