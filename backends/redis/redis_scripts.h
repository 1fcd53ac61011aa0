// Copyright dlock authors. The Lua scripts that make each lock operation one
// atomic step on the server (C3), and how they are sent.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_SCRIPTS_H_
#define DLOCK_BACKENDS_REDIS_REDIS_SCRIPTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "redis_connection.h"

namespace dlock::redis {

// A script's body and its SHA1, which the server computes (SCRIPT LOAD).
struct Script {
  const char* name;
  const char* body;
  std::string sha;
};

// The lock is one hash: owner, holds, token (fencing), lease (the kept
// maximum, ms), since (server ms), live (the holders' liveness keys). Its
// PEXPIRE is the lease.
struct Scripts {
  Script acquire;
  Script release;
  Script renew;
  Script inspect;
  Script force_unlock;
  // A monitor's force unlock: only while the hold carries a given token.
  Script force_unlock_if_token;
  // Redlock: writes the token a quorum agreed on into the hold and raises
  // the master's counter to it (docs/redis.md, fencing over a quorum).
  Script raise_token;
  // Refreshes a client's liveness key (Backend::RenewLiveness).
  Script liveness;

  Scripts();
  // Loads every script; called on the first connection.
  absl::Status Load(Connection& conn, absl::string_view endpoint);
};

// The EVALSHA command line; when the server answers NOSCRIPT (it was
// restarted or flushed its script cache), EvalCommand() sends the body.
std::vector<std::string> EvalShaCommand(const Script& script,
                                        const std::vector<std::string>& keys,
                                        const std::vector<std::string>& args);
std::vector<std::string> EvalCommand(const Script& script,
                                     const std::vector<std::string>& keys,
                                     const std::vector<std::string>& args);
bool IsNoScript(const redisReply* reply);

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_SCRIPTS_H_
