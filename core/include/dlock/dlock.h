// Copyright dlock authors. Everything service code needs, in one include:
// the client, locks and holds, errors, durations, and the adapters (a std
// mutex, the scheduled-job guard, config profiles, metrics) where this build
// has them.
//
//   absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
//       dlock::Connect("redis://127.0.0.1:6379");
//   absl::StatusOr<dlock::Hold> hold = (*client)->Acquire("reports/nightly");
//   dlock::DistributedMutex mutex(**client, "account/17");  // dlock::adapters
#ifndef DLOCK_DLOCK_H_
#define DLOCK_DLOCK_H_

#include "dlock/cancel.h"
#include "dlock/client.h"
#include "dlock/duration.h"
#include "dlock/errors.h"
#include "dlock/hold.h"
#include "dlock/lock.h"
#include "dlock/traits.h"

// The adapters' headers are on the include path of a target that links
// dlock::adapters (and in every install that has them); the core names no
// adapter otherwise.
#if __has_include("dlock/adapters/std_mutex.h")
#include "dlock/adapters/config.h"
#include "dlock/adapters/errors.h"
#include "dlock/adapters/job_guard.h"
#include "dlock/adapters/metrics.h"
#include "dlock/adapters/metrics_http.h"
#include "dlock/adapters/std_mutex.h"
#include "dlock/adapters/std_shared_mutex.h"
#endif

#endif  // DLOCK_DLOCK_H_
