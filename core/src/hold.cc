#include "dlock/hold.h"

#include <cstdio>
#include <exception>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dlock/errors.h"
#include "hold_site.h"
#include "lease_policy.h"
#include "qualified_name.h"

namespace dlock {
namespace {

absl::Mutex hook_mu(absl::kConstInit);
// Shared so that a report running a hook keeps it alive while another
// thread replaces it.
std::shared_ptr<const ReleaseErrorHook>& DefaultHook()
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(hook_mu) {
  static auto* hook = new std::shared_ptr<const ReleaseErrorHook>;
  return *hook;
}

void WriteToStderr(absl::string_view lock_name, const absl::Status& error) {
  const std::string line = absl::StrCat("dlock: releasing lock '", lock_name,
                                        "' failed: ", error.message(), "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace

void SetDefaultReleaseErrorHook(ReleaseErrorHook hook) {
  auto fresh = hook ? std::make_shared<const ReleaseErrorHook>(std::move(hook))
                    : nullptr;
  absl::MutexLock lock(&hook_mu);
  DefaultHook() = std::move(fresh);
}

void ReportReleaseError(const ReleaseErrorHook& hook,
                        absl::string_view lock_name,
                        const absl::Status& error) noexcept {
  try {
    if (hook) {
      hook(lock_name, error);
      return;
    }
    std::shared_ptr<const ReleaseErrorHook> fallback;
    {
      absl::MutexLock lock(&hook_mu);
      fallback = DefaultHook();
    }
    if (fallback) {
      (*fallback)(lock_name, error);
    } else {
      WriteToStderr(lock_name, error);
    }
  } catch (const std::exception& e) {
    WriteToStderr(
        lock_name,
        absl::InternalError(absl::StrCat(
            error.message(), "; the release-error hook threw: ", e.what())));
  } catch (...) {
    WriteToStderr(lock_name, error);
  }
}

Hold::Hold(std::shared_ptr<internal::HoldSite> site, std::string key,
           std::string owner, uint64_t fencing_token, int64_t hold_count,
           uint64_t generation,
           std::shared_ptr<const internal::AcquisitionShare> acquisition)
    : site_(std::move(site)),
      name_(internal::ObjectNameOf(key)),
      key_(internal::IsQualified(key) ? std::move(key) : std::string()),
      owner_(std::move(owner)),
      fencing_token_(fencing_token),
      hold_count_(hold_count),
      generation_(generation),
      acquisition_(std::move(acquisition)),
      lost_token_(acquisition_->lost) {}

Hold::Hold(Hold&& other) noexcept
    : site_(std::move(other.site_)),
      name_(std::move(other.name_)),
      key_(std::move(other.key_)),
      owner_(std::move(other.owner_)),
      fencing_token_(other.fencing_token_),
      hold_count_(other.hold_count_),
      generation_(other.generation_),
      acquisition_(std::move(other.acquisition_)),
      lost_token_(other.lost_token_) {
  other.site_ = nullptr;
}

Hold& Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    ReleaseOrReport();
    site_ = std::move(other.site_);
    other.site_ = nullptr;
    name_ = std::move(other.name_);
    key_ = std::move(other.key_);
    owner_ = std::move(other.owner_);
    fencing_token_ = other.fencing_token_;
    hold_count_ = other.hold_count_;
    generation_ = other.generation_;
    acquisition_ = std::move(other.acquisition_);
    lost_token_ = other.lost_token_;
  }
  return *this;
}

Hold::~Hold() { ReleaseOrReport(); }

internal::HoldRef Hold::Ref() const {
  return internal::HoldRef{.name = key_.empty() ? name_ : key_,
                           .owner = owner_,
                           .generation = generation_,
                           .acquisition = acquisition_.get()};
}

void Hold::ReleaseOrReport() noexcept {
  if (site_ == nullptr) return;
  std::shared_ptr<internal::HoldSite> site = site_;
  absl::Status released = Release();
  // Nothing failed that the hook should hear of: Close() ended the hold
  // already (C13); a loss was told once through the lost callbacks (C20);
  // an active Hold is refused as not the owner only when a release by
  // owner token (LockClient::OwnerTokens(), C6) took its acquisition.
  if (!released.ok() && !IsClientClosed(released) && !IsLost(released) &&
      !IsNotOwner(released)) {
    site->ReportReleaseError(name_, released);
  }
}

absl::Status Hold::Release() {
  if (site_ == nullptr) {
    return WithContext(NotOwnerError(Ref().name),
                       "this Hold was released already");
  }
  std::shared_ptr<internal::HoldSite> site = std::move(site_);
  site_ = nullptr;
  return site->ReleaseAcquisition(Ref(), absl::ZeroDuration());
}

absl::Status Hold::ReleaseAndKeepFor(absl::Duration keep_for) {
  if (keep_for == absl::ZeroDuration()) return Release();
  if (site_ == nullptr) {
    return WithContext(NotOwnerError(Ref().name),
                       "this Hold was released already");
  }
  if (keep_for < kMinLease || keep_for == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("keep_for must be zero, or finite and at least ",
                     absl::FormatDuration(kMinLease), ", not ",
                     absl::FormatDuration(keep_for)));
  }
  absl::Status released = site_->ReleaseAcquisition(Ref(), keep_for);
  // Refused because other acquisitions stand, or keeping is unsupported:
  // nothing changed, the Hold stays.
  const bool unchanged =
      ErrorKindOf(released) == ErrorKind::kAcquisitionsStanding ||
      absl::IsUnimplemented(released);
  if (!unchanged) site_ = nullptr;
  return released;
}

absl::Status Hold::KeepUntilLeaseEnd() {
  if (site_ == nullptr) {
    return WithContext(NotOwnerError(Ref().name),
                       "this Hold was released already");
  }
  absl::Status kept = site_->KeepUntilLeaseEnd(Ref());
  if (kept.ok()) site_ = nullptr;
  return kept;
}

absl::Status Hold::Renew(std::optional<absl::Duration> lease) {
  if (site_ == nullptr) {
    return WithContext(NotOwnerError(Ref().name),
                       "this Hold was released already");
  }
  return site_->RenewAcquisition(Ref(), lease);
}

LockState Hold::state() const {
  if (site_ == nullptr) return LockState::kNotHeld;
  return site_->StateOf(Ref(), nullptr);
}

absl::Status Hold::lost_reason() const {
  if (site_ == nullptr) return absl::OkStatus();
  absl::Status reason;
  if (site_->StateOf(Ref(), &reason) != LockState::kLost) {
    return absl::OkStatus();
  }
  return reason;
}

absl::StatusOr<bool> Hold::IsHeldOnBackend() const {
  if (site_ == nullptr) return false;
  return site_->IsHeldOnBackend(Ref());
}

}  // namespace dlock
