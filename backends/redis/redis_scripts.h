// Copyright dlock authors. The Lua scripts that make each lock operation one
// atomic step on the server (C3), and how they are sent: as the functions
// of one library (FUNCTION LOAD, FCALL) where the server allows it, else
// as cached scripts (SCRIPT LOAD, EVALSHA). The sources are the .lua files
// of backends/redis/scripts/.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_SCRIPTS_H_
#define DLOCK_BACKENDS_REDIS_REDIS_SCRIPTS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "redis_connection.h"

namespace dlock::redis {

// The library's name; a new layout or new semantics takes a new number, so
// that clients of two versions never replace each other's functions.
inline constexpr char kLibrary[] = "dlock_v5";

// A script: its name, its body for EVAL (the shared prelude and its own
// file), the function that runs it and its SHA1 (SCRIPT LOAD).
struct Script {
  std::string name;
  std::string body;
  std::string function;  // "dlock_v5_<name>"
  std::string sha;
  // The length of body's shared part (the prelude, and holders.lua for the
  // scripts of objects with many holders), which the library holds once.
  size_t shared_size = 0;
};

// Every script shares the lock value's layout (scripts/prelude.lua).
struct Scripts {
  // How the calls are sent, decided by Load().
  enum class Mode { kEval, kEvalSha, kFunction };

  Script acquire;
  Script release;
  Script renew;
  // The heartbeat, per held lock (Backend::RenewLiveness).
  Script refresh_liveness;
  Script inspect;
  Script force_unlock;
  // A monitor's force unlock: only while the hold carries a given token.
  Script force_unlock_if_token;
  // Redlock: writes the token a quorum agreed on into the hold (docs/redis.md,
  // fencing over a quorum).
  Script raise_token;
  // Semaphores and elections (issue 24; docs/redis.md): one hash of
  // holders per object.
  Script sem_acquire;
  Script sem_release;
  Script sem_renew;
  Script holder_refresh_liveness;
  Script holders_inspect;
  // A waiter that gives up takes its place with it.
  Script holders_abandon;
  Script holders_force_unlock;
  Script election_proclaim;
  // Redlock: raise_token for an election's leader.
  Script holder_raise_token;
  // A multi-lock's names all or nothing, on one master (C25).
  Script multi_acquire;
  // A lock's readers (C23), and its writer's look at them once acquire
  // refused it a lock held by nobody.
  Script read_acquire;
  Script read_release;
  Script read_renew;
  Script write_acquire;
  // The rolling upgrade's check (scripts/layout_guard.lua), sent with EVAL.
  Script layout_guard;
  Mode mode = Mode::kEval;

  Scripts();
  // Loads the library (FUNCTION LOAD REPLACE); where the server has no
  // functions or the user may not load them, caches each script (SCRIPT
  // LOAD) instead. Called on the first connection.
  absl::Status Load(Connection& conn, absl::string_view endpoint);

  // The library's source (FUNCTION LOAD).
  std::string Library() const;

  // The command line that runs `script`: FCALL, EVALSHA or EVAL.
  std::vector<std::string> Command(const Script& script,
                                   const std::vector<std::string>& keys,
                                   const std::vector<std::string>& args) const;
  // The verb and what it names for `script`: FCALL and its function,
  // EVALSHA and its SHA1, or EVAL and its body (not loaded: the master was
  // down when the client started).
  std::pair<const char*, const std::string*> Verb(const Script& script) const;
  // The same, RESP-encoded onto `out` (what every lock call sends): no
  // argument is copied on the way.
  void AppendCommand(std::string& out, const Script& script,
                     const std::vector<std::string>& keys,
                     const std::vector<std::string>& args) const;
  // At least the bytes AppendCommand() adds (ASKING before it included),
  // so that a caller can reserve them at once.
  size_t AppendedSizeBound(const Script& script,
                           const std::vector<std::string>& keys,
                           const std::vector<std::string>& args) const;
  // The server no longer knows the function or the script (a restart
  // without persistence, SCRIPT or FUNCTION FLUSH): what to send instead,
  // on the same connection, in one round trip: the library again (in
  // function mode, so that later calls find it) and the script's body,
  // whose reply is the last.
  std::vector<std::vector<std::string>> Fallback(
      const Script& script, const std::vector<std::string>& keys,
      const std::vector<std::string>& args) const;

 private:
  std::vector<Script*> All();
  std::vector<const Script*> All() const;
};

// NOSCRIPT, or a function the server does not know.
bool IsNoScript(const redisReply* reply);

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_SCRIPTS_H_
