// Copyright dlock authors. What a Hold (dlock/hold.h) asks of the client
// that granted it. The client core implements it; a Hold keeps it alive, so
// a Hold may outlive its client (its calls then fail with IsClientClosed).
#ifndef DLOCK_CORE_SRC_HOLD_SITE_H_
#define DLOCK_CORE_SRC_HOLD_SITE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/hold.h"

namespace dlock::internal {

// What one acquisition shares with its Hold; its address names the
// acquisition.
struct AcquisitionShare {
  CancelToken lost;  // Hold::lost_token()
  // A release by its owner token (LockClient::OwnerTokens(), C6) took this
  // acquisition: its Hold learns that it was released, not lost. Set under
  // the client core's mutex.
  std::atomic<bool> released_by_token{false};
};

// Names one acquisition of a Hold: the lock, the owner id as stored, which
// hold of that owner (a later one after a loss has another generation) and
// which acquisition of it.
struct HoldRef {
  absl::string_view name;
  absl::string_view owner;
  uint64_t generation = 0;
  const AcquisitionShare* acquisition = nullptr;
};

class HoldSite {
 public:
  virtual ~HoldSite() = default;

  // `keep_for` zero: a plain release. Positive: Hold::ReleaseAndKeepFor(),
  // refused with nothing changed as kAcquisitionsStanding while other
  // acquisitions stand, or as Unimplemented where the backend cannot keep a
  // lock after its release.
  virtual absl::Status ReleaseAcquisition(const HoldRef& ref,
                                          absl::Duration keep_for) = 0;
  virtual absl::Status KeepUntilLeaseEnd(const HoldRef& ref) = 0;
  virtual absl::Status RenewAcquisition(
      const HoldRef& ref, std::optional<absl::Duration> lease) = 0;
  // The local view; `reason` gets why when kLost.
  virtual LockState StateOf(const HoldRef& ref, absl::Status* reason) = 0;
  virtual absl::StatusOr<bool> IsHeldOnBackend(const HoldRef& ref) = 0;
  virtual void ReportReleaseError(absl::string_view name,
                                  const absl::Status& error) = 0;

 protected:
  static Hold MakeHold(std::shared_ptr<HoldSite> site, std::string name,
                       std::string owner, uint64_t fencing_token,
                       int64_t hold_count, uint64_t generation,
                       std::shared_ptr<const AcquisitionShare> acquisition) {
    return Hold(std::move(site), std::move(name), std::move(owner),
                fencing_token, hold_count, generation, std::move(acquisition));
  }
};

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_HOLD_SITE_H_
