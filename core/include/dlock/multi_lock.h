// Copyright dlock authors. Several locks taken all or nothing and released
// together (C25), from LockClient::AcquireAll(). Design and per-backend
// algorithms: docs/design/primitives.md.
#ifndef DLOCK_MULTI_LOCK_H_
#define DLOCK_MULTI_LOCK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/cancel.h"
#include "dlock/hold.h"

namespace dlock {

// The most names one AcquireAll() takes.
inline constexpr size_t kMaxMultiLockNames = 64;

namespace internal {
class MultiSite;  // what the holds of one multi-hold share; core/src
}  // namespace internal

// The holds of one AcquireAll(): one Hold per name, each a lock's, taken
// together and given up together. Move-only; an empty MultiHold is
// !active(); destroying an active one releases every name (failures go to
// the release-error hook, as a Hold's destructor's do).
//
// Losing any one name is losing the multi-hold (C25): state() says kLost,
// lost_token() fires, and AcquireOptions::on_lost of the AcquireAll() call
// runs, once for the multi-hold, with the event of the first name lost
// (C20). The other names stay held until Release() (or the destructor),
// which gives them all up: code acting on a lost multi-hold must stop
// touching every resource of it.
//
// Thread safety: as Hold.
class [[nodiscard]] MultiHold {
 public:
  MultiHold() = default;
  MultiHold(MultiHold&&) noexcept = default;
  MultiHold& operator=(MultiHold&& other) noexcept;
  MultiHold(const MultiHold&) = delete;
  MultiHold& operator=(const MultiHold&) = delete;
  ~MultiHold();

  bool active() const { return !holds_.empty(); }
  explicit operator bool() const { return active(); }

  // The names, in the order AcquireAll() was given them.
  std::vector<std::string> names() const;
  // The hold of each name, in that order: its fencing token (C8) is the one
  // to pass to that name's resource.
  const std::vector<Hold>& holds() const { return holds_; }
  // The fencing token of `name`'s hold; 0 when `name` is not one of them.
  uint64_t fencing_token(absl::string_view name) const;

  // kHeld while every name is believed held (C19), kLost once any one is
  // lost, kNotHeld once released.
  LockState state() const;
  bool lost() const { return state() == LockState::kLost; }
  absl::Status lost_reason() const;
  const CancelToken& lost_token() const { return lost_token_; }

  // Releases every name, all of them even when some fail; returns the
  // first failure: FailedPrecondition IsLost when the multi-hold was lost
  // before (told already), Unavailable when a release was not confirmed
  // (retried in the background, C21). Once: afterwards the MultiHold is
  // empty.
  absl::Status Release();
  // Renews every name (Hold::Renew()); the first failure, IsLost when one
  // was lost.
  absl::Status Renew(std::optional<absl::Duration> lease = {});

 private:
  friend class internal::MultiSite;
  MultiHold(std::vector<Hold> holds, CancelToken lost_token,
            std::shared_ptr<internal::MultiSite> site)
      : holds_(std::move(holds)),
        lost_token_(std::move(lost_token)),
        site_(std::move(site)) {}

  std::vector<Hold> holds_;
  CancelToken lost_token_;
  std::shared_ptr<internal::MultiSite> site_;
};

}  // namespace dlock

#endif  // DLOCK_MULTI_LOCK_H_
