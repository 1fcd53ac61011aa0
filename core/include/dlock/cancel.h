// Copyright dlock authors. A token that lets a caller cancel a blocking wait.
#ifndef DLOCK_CANCEL_H_
#define DLOCK_CANCEL_H_

#include <cstdint>
#include <functional>
#include <memory>

namespace dlock {

// A cheap, copyable handle to one cancellation flag. Copies share the flag, so
// a caller keeps one copy and hands another to Acquire(). A default token is a
// fresh flag that nobody else can cancel.
class CancelToken {
 public:
  CancelToken();

  // Sets the flag and wakes every wait watching it. Idempotent.
  void Cancel() const;
  bool IsCancelled() const;

  // For backends: runs `callback` once when the token is cancelled (at once,
  // on this thread, if it already is). Returns an id for RemoveCallback().
  uint64_t AddCallback(std::function<void()> callback) const;
  void RemoveCallback(uint64_t id) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Registers a callback for the lifetime of the scope (RAII for AddCallback).
class ScopedCancelCallback {
 public:
  ScopedCancelCallback(const CancelToken& token, std::function<void()> callback)
      : token_(token), id_(token.AddCallback(std::move(callback))) {}
  ~ScopedCancelCallback() { token_.RemoveCallback(id_); }
  ScopedCancelCallback(const ScopedCancelCallback&) = delete;
  ScopedCancelCallback& operator=(const ScopedCancelCallback&) = delete;

 private:
  CancelToken token_;
  uint64_t id_;
};

}  // namespace dlock

#endif  // DLOCK_CANCEL_H_
