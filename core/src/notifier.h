// Copyright dlock authors. The notifier: one thread per client that marks
// holds lost when their local deadline comes (C19) and tells every loss
// once, through the lost callbacks and the observer (C20). Apart from the
// renewer, so that a renewal stuck in a slow network call cannot delay the
// notice that its hold is over. Deliver() is also how a caller's thread
// tells the losses its own call found.
#ifndef DLOCK_CORE_SRC_NOTIFIER_H_
#define DLOCK_CORE_SRC_NOTIFIER_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "core_state.h"

namespace dlock::internal {

class Notifier {
 public:
  explicit Notifier(CoreState& state) : state_(state) {}

  // The thread's loop, until the client closes.
  void Run() ABSL_LOCKS_EXCLUDED(state_.mu);

  // Tells `notices` (and clears them): the hold's cancel tokens first, then
  // its callbacks, the client's callback and the observer. With no lock of
  // the client held: a callback may call the client, even Close().
  void Deliver(std::vector<LossNotice>& notices) const
      ABSL_LOCKS_EXCLUDED(state_.mu);

 private:
  CoreState& state_;
};

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_NOTIFIER_H_
