// Copyright dlock authors. The Lua sources of backends/redis/scripts/, as
// the build embeds them (scripts/embed_lua.cmake).
#ifndef DLOCK_BACKENDS_REDIS_REDIS_SCRIPT_SOURCES_H_
#define DLOCK_BACKENDS_REDIS_REDIS_SCRIPT_SOURCES_H_

namespace dlock::redis::lua {

extern const char kPrelude[];
extern const char kAcquire[];
extern const char kRelease[];
extern const char kRenew[];
extern const char kRefreshLiveness[];
extern const char kInspect[];
extern const char kForceUnlock[];
extern const char kForceUnlockIfToken[];
extern const char kRaiseToken[];
extern const char kLayoutGuard[];
// Objects with many holders (issue 24): appended to the prelude for the
// scripts below it.
extern const char kHolders[];
extern const char kSemAcquire[];
extern const char kSemRelease[];
extern const char kSemRenew[];
extern const char kHolderRefreshLiveness[];
extern const char kHoldersInspect[];
extern const char kHoldersAbandon[];
extern const char kHoldersForceUnlock[];
extern const char kElectionProclaim[];
extern const char kHolderRaiseToken[];
extern const char kMultiAcquire[];
// A lock's readers (C23) and its writer's side of them.
extern const char kReadAcquire[];
extern const char kReadRelease[];
extern const char kReadRenew[];
extern const char kWriteAcquire[];

}  // namespace dlock::redis::lua

#endif  // DLOCK_BACKENDS_REDIS_REDIS_SCRIPT_SOURCES_H_
