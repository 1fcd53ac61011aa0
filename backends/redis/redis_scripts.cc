#include "redis_scripts.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "redis_script_sources.h"

namespace dlock::redis {
namespace {

Script MakeScript(const char* name, const char* source) {
  return Script{.name = name,
                .body = absl::StrCat(lua::kPrelude, source),
                .function = absl::StrCat(kLibrary, "_", name),
                .sha = "",
                .shared_size = absl::string_view(lua::kPrelude).size()};
}

// A script of a holders hash: the prelude and holders.lua before it. The
// lock's scripts go without holders.lua, so that EVALSHA defines none of
// its functions on every lock call.
Script MakeHoldersScript(const char* name, const char* source) {
  Script script = MakeScript(name, source);
  script.body = absl::StrCat(lua::kPrelude, lua::kHolders, source);
  script.shared_size += absl::string_view(lua::kHolders).size();
  return script;
}

// "<verb> <script> <number of keys> keys... args...".
std::vector<std::string> ScriptCommand(const char* verb,
                                       const std::string& script,
                                       const std::vector<std::string>& keys,
                                       const std::vector<std::string>& args) {
  std::vector<std::string> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back(verb);
  argv.push_back(script);
  argv.push_back(absl::StrCat(keys.size()));
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

Scripts::Scripts()
    : acquire(MakeScript("acquire", lua::kAcquire)),
      release(MakeScript("release", lua::kRelease)),
      renew(MakeScript("renew", lua::kRenew)),
      refresh_liveness(MakeScript("refresh_liveness", lua::kRefreshLiveness)),
      // With a lock's readers too (holders.lua).
      inspect(MakeHoldersScript("inspect", lua::kInspect)),
      force_unlock(MakeScript("force_unlock", lua::kForceUnlock)),
      force_unlock_if_token(
          MakeScript("force_unlock_if_token", lua::kForceUnlockIfToken)),
      raise_token(MakeScript("raise_token", lua::kRaiseToken)),
      sem_acquire(MakeHoldersScript("sem_acquire", lua::kSemAcquire)),
      sem_release(MakeHoldersScript("sem_release", lua::kSemRelease)),
      sem_renew(MakeHoldersScript("sem_renew", lua::kSemRenew)),
      holder_refresh_liveness(MakeHoldersScript("holder_refresh_liveness",
                                                lua::kHolderRefreshLiveness)),
      holders_inspect(
          MakeHoldersScript("holders_inspect", lua::kHoldersInspect)),
      holders_abandon(
          MakeHoldersScript("holders_abandon", lua::kHoldersAbandon)),
      holders_force_unlock(
          MakeHoldersScript("holders_force_unlock", lua::kHoldersForceUnlock)),
      election_proclaim(
          MakeHoldersScript("election_proclaim", lua::kElectionProclaim)),
      holder_raise_token(
          MakeHoldersScript("holder_raise_token", lua::kHolderRaiseToken)),
      multi_acquire(MakeScript("multi_acquire", lua::kMultiAcquire)),
      read_acquire(MakeHoldersScript("read_acquire", lua::kReadAcquire)),
      read_release(MakeHoldersScript("read_release", lua::kReadRelease)),
      read_renew(MakeHoldersScript("read_renew", lua::kReadRenew)),
      write_acquire(MakeHoldersScript("write_acquire", lua::kWriteAcquire)),
      layout_guard(MakeScript("layout_guard", lua::kLayoutGuard)) {}

namespace {

// The scripts of the library (the layout guard runs alone, with EVAL), for
// a const and a mutable Scripts alike.
template <typename Self>
auto LibraryScripts(Self& s) -> std::vector<decltype(&s.acquire)> {
  return {&s.acquire,
          &s.release,
          &s.renew,
          &s.refresh_liveness,
          &s.inspect,
          &s.force_unlock,
          &s.force_unlock_if_token,
          &s.raise_token,
          &s.sem_acquire,
          &s.sem_release,
          &s.sem_renew,
          &s.holder_refresh_liveness,
          &s.holders_inspect,
          &s.holders_abandon,
          &s.holders_force_unlock,
          &s.election_proclaim,
          &s.holder_raise_token,
          &s.multi_acquire,
          &s.read_acquire,
          &s.read_release,
          &s.read_renew,
          &s.write_acquire};
}

}  // namespace

std::vector<Script*> Scripts::All() { return LibraryScripts(*this); }

std::vector<const Script*> Scripts::All() const {
  return LibraryScripts(*this);
}

std::string Scripts::Library() const {
  // One copy of the prelude and holders.lua serves every function.
  std::string text =
      absl::StrCat("#!lua name=", kLibrary, "\n", lua::kPrelude, lua::kHolders);
  for (const Script* s : All()) {
    absl::StrAppend(&text, "redis.register_function('", s->function,
                    "', function(KEYS, ARGV)\n",
                    absl::string_view(s->body).substr(s->shared_size),
                    "\nend)\n");
  }
  return text;
}

absl::Status Scripts::Load(Connection& conn, absl::string_view endpoint) {
  // Redis drops a client that is not yet authenticated as soon as it sends
  // a bulk over 16 KB, which the library is: a small command first lets a
  // server that wants a password, and was given none, say so (NOAUTH).
  absl::StatusOr<Reply> probe = conn.Command({"TIME"});
  if (!probe.ok()) return probe.status();
  if (absl::Status s = ReplyError(probe->get(), "TIME", endpoint); !s.ok()) {
    return s;
  }
  absl::StatusOr<Reply> loaded =
      conn.Command({"FUNCTION", "LOAD", "REPLACE", Library()});
  if (!loaded.ok()) return loaded.status();
  if ((*loaded)->type != REDIS_REPLY_ERROR) {
    mode = Mode::kFunction;
    return absl::OkStatus();
  }
  // No FUNCTION (before 7.0), or an ACL without it: cached scripts.
  for (Script* script : All()) {
    absl::StatusOr<Reply> reply =
        conn.Command({"SCRIPT", "LOAD", script->body});
    if (!reply.ok()) return reply.status();
    if (absl::Status s = ReplyError(reply->get(), "SCRIPT LOAD", endpoint);
        !s.ok()) {
      return s;
    }
    script->sha.assign((*reply)->str, (*reply)->len);
  }
  mode = Mode::kEvalSha;
  return absl::OkStatus();
}

std::pair<const char*, const std::string*> Scripts::Verb(
    const Script& script) const {
  if (mode == Mode::kFunction) return {"FCALL", &script.function};
  if (script.sha.empty()) return {"EVAL", &script.body};
  return {"EVALSHA", &script.sha};
}

std::vector<std::string> Scripts::Command(
    const Script& script, const std::vector<std::string>& keys,
    const std::vector<std::string>& args) const {
  const auto [verb, named] = Verb(script);
  return ScriptCommand(verb, *named, keys, args);
}

void Scripts::AppendCommand(std::string& out, const Script& script,
                            const std::vector<std::string>& keys,
                            const std::vector<std::string>& args) const {
  const auto [verb, named] = Verb(script);
  // As ScriptCommand() lays it out.
  AppendArrayHeader(out, 3 + keys.size() + args.size());
  AppendBulk(out, verb);
  AppendBulk(out, *named);
  AppendBulk(out, absl::StrCat(keys.size()));
  for (const std::string& key : keys) AppendBulk(out, key);
  for (const std::string& arg : args) AppendBulk(out, arg);
}

size_t Scripts::AppendedSizeBound(const Script& script,
                                  const std::vector<std::string>& keys,
                                  const std::vector<std::string>& args) const {
  // The array headers, ASKING, the verb and numkeys fit in 64; each
  // argument adds its bytes and at most 16 of framing ("$<len>\r\n...\r\n").
  size_t size = 64 + Verb(script).second->size() + 16;
  for (const std::string& key : keys) size += key.size() + 16;
  for (const std::string& arg : args) size += arg.size() + 16;
  return size;
}

std::vector<std::vector<std::string>> Scripts::Fallback(
    const Script& script, const std::vector<std::string>& keys,
    const std::vector<std::string>& args) const {
  std::vector<std::vector<std::string>> commands;
  if (mode == Mode::kFunction) {
    commands.push_back({"FUNCTION", "LOAD", "REPLACE", Library()});
  }
  // EVAL caches the script again for the next EVALSHA.
  commands.push_back(ScriptCommand("EVAL", script.body, keys, args));
  return commands;
}

bool IsNoScript(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ERROR) return false;
  const absl::string_view text(reply->str, reply->len);
  return absl::StartsWith(text, "NOSCRIPT") ||
         absl::StartsWith(text, "ERR Function not found");
}

}  // namespace dlock::redis
