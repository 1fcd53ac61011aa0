// The zk:// backend's setup and shutdown, its traits, the session bound of
// holds, and what becomes of holds whose session ends. Acquisition and
// release are in zk_release.cc (the queue in zk_queue.cc), introspection and
// force unlock in zk_inspect.cc.
#include "zk_backend.h"

#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dlock::zk {
namespace {

// 64 random bits as hex. The client id alone does not tell two backends
// apart: ClientOptions::client_id may give two processes the same one.
std::string RandomHex() {
  std::random_device random;
  const uint64_t bits = (static_cast<uint64_t>(random()) << 32) ^ random();
  return absl::StrCat(absl::Hex(bits, absl::kZeroPad16));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> ZkBackend::Create(
    BackendSettings settings) {
  std::unique_ptr<ZkBackend> backend(new ZkBackend(std::move(settings)));
  if (absl::Status s = backend->Start(); !s.ok()) return s;
  return backend;
}

ZkBackend::ZkBackend(BackendSettings settings)
    : settings_(std::move(settings)),
      base_(
          absl::StrCat(settings_.chroot, "/dlock/", settings_.lock_namespace)),
      hub_(*settings_.clock) {}

absl::Status ZkBackend::Start() {
  absl::StatusOr<std::unique_ptr<Session>> session =
      Session::Open(settings_.session, &hub_);
  if (!session.ok()) return session.status();
  session_ = *std::move(session);
  writer_ = std::make_unique<NodeWriter>(*session_);
  janitor_ = std::make_unique<Janitor>(*writer_, base_, settings_.kept_sweep);
  LockQueue::Settings queue{
      .node_prefix = absl::StrCat(settings_.client_id, "-", RandomHex(), "-"),
      .base = base_,
      .fallback_poll = settings_.fallback_poll};
  std::string path;
  for (absl::string_view part :
       absl::StrSplit(settings_.chroot, '/', absl::SkipEmpty())) {
    absl::StrAppend(&path, "/", part);
    queue.ancestors.push_back(path);
  }
  queue.ancestors.push_back(absl::StrCat(path, "/dlock"));
  queue_ = std::make_unique<LockQueue>(*writer_, *janitor_, holds_, hub_,
                                       std::move(queue));
  session_->Start(Session::Events{
      .lost = [this](
                  uint64_t generation,
                  const absl::Status& why) { OnSessionLost(generation, why); },
      .tick =
          [this] {
            janitor_->RetryPending();
            // Short: the session thread has a connection to watch.
            janitor_->SweepKept(Now() + absl::Seconds(1));
          }});
  return absl::OkStatus();
}

ZkBackend::~ZkBackend() { Shutdown(); }

void ZkBackend::Shutdown() {
  if (session_ == nullptr) return;
  // No background work may run on a session being closed.
  session_->Stop();
  janitor_->SweepBeforeShutdown();
  // Ends the session: its ephemeral nodes go at once.
  queue_.reset();
  janitor_.reset();
  writer_.reset();
  session_.reset();
}

std::string ZkBackend::ParentOf(ObjectKind kind, absl::string_view name) const {
  return absl::StrCat(base_, "/", ObjectComponent(kind, name));
}

BackendTraits ZkBackend::Traits() const {
  return BackendTraits{.fifo_waiting = true,
                       .holds_tied_to_session = true,
                       .holds_survive_restart = true,
                       .fencing = FencingStrength::kDurable,
                       .can_list = true,
                       .keeps_after_release = true,
                       .semaphores = true,
                       .read_write_locks = true,
                       .elections = true,
                       .semaphore_order = WaiterOrder::kFifo};
}

MonoTime ZkBackend::HeldUntil(absl::string_view, absl::string_view,
                              const HoldRecord* record) {
  // The core calls this under its own mutex: atomic loads (the record's
  // and the session's), no lock, so this neither blocks nor deadlocks with
  // OnHoldLost().
  const ZkHold* hold = ZkHold::Of(record);
  // Ended: released, taken over, its lease ran out, or lost with its
  // session. (Every hold this backend grants has a record.)
  if (hold == nullptr || !hold->live()) return MonoTime::InfinitePast();
  uint64_t generation = hold->generation();
  // Generation 0: a re-entry of a node another client created (an owner
  // token shared between clients, C6). That node lives on the other
  // client's session, which we cannot watch; our own session must at least
  // be alive for us to renew or release it.
  if (generation == 0) generation = session_->current_generation();
  return session_->BelievableUntil(generation);
}

void ZkBackend::OnSessionLost(uint64_t generation, const absl::Status& why) {
  std::vector<std::pair<std::shared_ptr<ZkHold>, LocalHold>> lost =
      holds_.LoseSession(generation, why);
  for (const auto& [record, hold] : lost) {
    // If the session lives on after all, the node must not keep the lock.
    janitor_->Queue(PendingDelete{.path = hold.path, .version = hold.version});
  }
  for (const auto& [record, hold] : lost) {
    // A reader's record keeps the owner as stored ("r:<owner>").
    const bool reader = record->shape().mode == HoldMode::kShared;
    settings_.listener->OnHoldLost(
        record->name(),
        reader ? OwnerOfReader(record->owner()) : record->owner(),
        record->shape(), why);
  }
}

}  // namespace dlock::zk
