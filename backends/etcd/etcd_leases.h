// Copyright dlock authors. The lease calls that the etcd:// backend's holds
// and its clients' liveness keys share, each answered as a LeaseState counted
// from the call's sending (the safe side: etcd counts from its receipt).
#ifndef DLOCK_BACKENDS_ETCD_ETCD_LEASES_H_
#define DLOCK_BACKENDS_ETCD_ETCD_LEASES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/clock.h"
#include "etcd_client.h"
#include "etcd_hold.h"

namespace dlock::etcd {

// The TTL a grant for `lease` asks: etcd counts whole seconds, so rounded up
// (the safe side, rules.h).
absl::Duration GrantTtl(absl::Duration lease);
// A lease of GrantTtl(lease); etcd may raise it to its minimum.
absl::StatusOr<LeaseState> GrantLease(Client& client, const Clock& clock,
                                      absl::Duration lease);
// A keepalive of `lease`, answered by `deadline`. NotFound when etcd no
// longer knows the lease.
absl::StatusOr<LeaseState> KeepLeaseAlive(Client& client, const Clock& clock,
                                          int64_t lease, absl::Time deadline);
// KeepLeaseAlive() of every lease, sent together (LeaseKeeper::
// KeepAliveEach); one result per lease, in order.
std::vector<absl::StatusOr<LeaseState>> KeepLeasesAlive(
    Client& client, const Clock& clock, absl::Span<const int64_t> leases,
    absl::Time deadline);

}  // namespace dlock::etcd

#endif  // DLOCK_BACKENDS_ETCD_ETCD_LEASES_H_
