#include "zk_janitor.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "zk_driver.h"

namespace dlock::zk {

Janitor::Janitor(NodeWriter& writer, std::string base,
                 absl::Duration kept_sweep)
    : writer_(writer),
      session_(writer.session()),
      base_(std::move(base)),
      kept_sweep_(kept_sweep),
      next_sweep_(writer.Now() + kept_sweep) {}

void Janitor::Queue(PendingDelete pending) {
  absl::MutexLock lock(&mu_);
  pending_.push_back(std::move(pending));
}

bool Janitor::Deleting(absl::string_view path) {
  auto covers = [&](const PendingDelete& p) {
    if (p.prefix.empty()) return p.path == path;
    absl::string_view child = path;
    return absl::ConsumePrefix(&child, p.path) &&
           absl::ConsumePrefix(&child, "/") &&
           absl::StartsWith(child, p.prefix);
  };
  absl::MutexLock lock(&mu_);
  return std::any_of(pending_.begin(), pending_.end(), covers) ||
         std::any_of(retrying_.begin(), retrying_.end(), covers);
}

void Janitor::Abandon(OwnNode& own) {
  const int rc = writer_.TakeOwnHoldOff(own, writer_.CallDeadline());
  if (NodeWriter::IsConnectionError(rc)) {
    Queue(PendingDelete{.path = own.path, .owner = own.data.owner});
  }
}

void Janitor::NoteKeep() {
  absl::MutexLock lock(&mu_);
  made_keep_ = true;
}

int Janitor::GiveUpOwn(const std::string& path, const std::string& owner,
                       MonoTime deadline) {
  // An acquisition's node is never deleted blindly: another client of the
  // same owner token may have re-entered it (C6).
  OwnNode own{.path = path, .data = NodeData{.owner = owner}};
  int rc = writer_.ReloadOwn(own, deadline);
  if (rc == ZOK) rc = writer_.TakeOwnHoldOff(own, deadline);
  return rc;
}

bool Janitor::Retry(const PendingDelete& p, MonoTime deadline) {
  if (!p.kept_path.empty() && writer_.Now() < p.keep_until) {
    // A release that keeps the lock, never a bare delete that would free it
    // early (C21).
    const int rc =
        writer_
            .ReleaseKeeping(p.path, p.version, p.kept_path, p.kept_token,
                            p.keep_until - writer_.Now())
            .Wait(deadline)
            .rc;
    return !NodeWriter::IsConnectionError(rc);
  }
  if (p.prefix.empty()) {
    const int rc = p.owner.empty()
                       ? session_.Delete(p.path, p.version).Wait(deadline).rc
                       : GiveUpOwn(p.path, p.owner, deadline);
    return !NodeWriter::IsConnectionError(rc);
  }
  Reply list = session_.Children(p.path).Wait(deadline);
  if (NodeWriter::IsConnectionError(list.rc)) return false;
  bool done = true;
  for (const std::string& child : list.children) {
    if (!absl::StartsWith(child, p.prefix)) continue;
    const int rc =
        GiveUpOwn(absl::StrCat(p.path, "/", child), p.owner, deadline);
    done = done && !NodeWriter::IsConnectionError(rc);
  }
  return done;
}

void Janitor::RetryPending() {
  std::vector<PendingDelete> work;
  {
    absl::MutexLock lock(&mu_);
    if (pending_.empty()) return;
    work.swap(pending_);
    retrying_ = work;
  }
  // Short, so that the session thread soon gets back to its watch on the
  // connection.
  const MonoTime deadline =
      writer_.Now() + std::min(session_.call_timeout(), absl::Seconds(2));
  std::vector<PendingDelete> keep;
  for (PendingDelete& p : work) {
    if (!Retry(p, deadline)) keep.push_back(std::move(p));
  }
  absl::MutexLock lock(&mu_);
  for (PendingDelete& p : keep) pending_.push_back(std::move(p));
  retrying_.clear();
}

void Janitor::SweepName(const std::string& name, MonoTime until) {
  // Deleted only well after its end, as estimated from ZooKeeper's clock:
  // the estimate may be off by the round trip it was taken in.
  constexpr int64_t kMarginMs = 5000;
  auto deadline = [&] { return std::min(until, writer_.CallDeadline()); };
  const std::string parent = absl::StrCat(base_, "/", name);
  Reply children = session_.Children(parent).Wait(deadline());
  if (children.rc != ZOK) return;
  for (const std::string& child : children.children) {
    if (!IsKeptNode(child)) continue;
    const std::string path = absl::StrCat(parent, "/", child);
    Reply got = session_.Get(path, false).Wait(deadline());
    if (got.rc != ZOK) continue;
    const std::optional<int64_t> end = KeptEnd(got);
    if (!end.has_value() ||
        *end + kMarginMs > session_.EstimatedServerNowMs()) {
      continue;
    }
    // At the version read: a node rewritten since is left alone.
    (void)session_.Delete(path, got.stat.version).Wait(deadline());
  }
}

void Janitor::SweepKept(MonoTime until) {
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    if (sweep_names_.empty()) {
      const MonoTime now = writer_.Now();
      if (now < next_sweep_) return;
      next_sweep_ = now + kept_sweep_;
    }
    names.swap(sweep_names_);
  }
  if (names.empty()) {
    Reply list =
        session_.Children(base_).Wait(std::min(until, writer_.CallDeadline()));
    if (list.rc != ZOK) return;
    names = std::move(list.children);
  }
  while (!names.empty() && writer_.Now() < until) {
    const std::string name = std::move(names.back());
    names.pop_back();
    SweepName(name, until);
  }
  absl::MutexLock lock(&mu_);
  sweep_names_ = std::move(names);
}

void Janitor::SweepBeforeShutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (!made_keep_) return;
    next_sweep_ = MonoTime::InfinitePast();
  }
  if (writer_.Connected()) SweepKept(writer_.Now() + absl::Seconds(1));
}

}  // namespace dlock::zk
