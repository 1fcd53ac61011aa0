#include "history_backends.h"

#include <functional>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "test_servers.h"

namespace dlock::test {
namespace {

absl::Status Call(const TestBackend& entry, const char* what,
                  const std::function<absl::Status()>& hook) {
  if (!hook) {
    return absl::UnimplementedError(
        absl::StrCat("the ", entry.label, " harness cannot ", what));
  }
  return hook();
}

// A registry entry (integration/test_servers.h) whose server has started.
class RegistryBackend : public HistoryBackend {
 public:
  RegistryBackend(TestBackend entry, int port)
      : entry_(std::move(entry)), port_(port) {}
  int port() const override { return port_; }
  std::string Uri(const std::string& ns, int i,
                  const WorkerUri& options) const override {
    std::vector<std::string> extra;
    // Workers are named so that TerminateSessionsOf() finds theirs.
    if (entry_.terminate_sessions) {
      extra.push_back(absl::StrCat("application_name=history-worker-", i));
    }
    if (options.short_session && !entry_.short_session_param.empty()) {
      extra.push_back(entry_.short_session_param);
    }
    if (!options.extra.empty()) extra.push_back(options.extra);
    absl::StatusOr<std::string> uri =
        entry_.uri({.ns = ns,
                    .extra = absl::StrJoin(extra, "&"),
                    .port = options.proxy_port});
    // The server started before this object was made.
    return uri.ok() ? *uri : entry_.unreachable_uri(ns);
  }
  absl::Status KillAndRestart() override {
    if (absl::Status s = Call(entry_, "kill its server", entry_.kill);
        !s.ok()) {
      return s;
    }
    return Call(entry_, "start its server", entry_.start);
  }
  absl::Status StopAndStart(absl::Duration down) override {
    if (absl::Status s = Call(entry_, "stop its server", entry_.stop);
        !s.ok()) {
      return s;
    }
    absl::SleepFor(down);
    return Call(entry_, "start its server", entry_.start);
  }
  absl::Status TerminateSessionsOf(int i) override {
    if (!entry_.terminate_sessions) {
      return HistoryBackend::TerminateSessionsOf(i);
    }
    return entry_.terminate_sessions(absl::StrCat("history-worker-", i))
        .status();
  }
  absl::Status FailOver() override {
    if (absl::Status s = Call(entry_, "kill its primary", entry_.kill_primary);
        !s.ok()) {
      return s;
    }
    return Call(entry_, "promote its standby", entry_.promote_standby);
  }
  absl::Status RebuildStandby() override {
    return Call(entry_, "rebuild its standby", entry_.rebuild_standby);
  }
  absl::Status MigrateSlot(absl::Duration half_moved) override {
    std::function<absl::Status()> migrate;
    if (entry_.migrate_slot) {
      migrate = [&] { return entry_.migrate_slot(half_moved); };
    }
    return Call(entry_, "migrate a slot", migrate);
  }

 private:
  const TestBackend entry_;
  const int port_;
};

absl::StatusOr<std::unique_ptr<HistoryBackend>> StartBackend(
    const std::string& name) {
  absl::StatusOr<TestBackend> entry = FindTestBackend(name);
  if (!entry.ok()) return entry.status();
  if (!entry->port) {
    return absl::InvalidArgumentError(
        absl::StrCat("test backend '", name, "' has no server"));
  }
  absl::StatusOr<int> port = entry->port();  // starts the server
  if (!port.ok()) return port.status();
  return std::make_unique<RegistryBackend>(*std::move(entry), *port);
}

}  // namespace

absl::Status HistoryBackend::TerminateSessionsOf(int) {
  return absl::UnimplementedError(
      "terminating sessions does not apply to this backend");
}

std::vector<std::string> BuiltBackends() {
  std::vector<std::string> names;
  for (const TestBackend& entry :
       TestBackends({.across_processes = true, .with_variants = true})) {
    names.push_back(entry.label);
  }
  return names;
}

absl::StatusOr<HistoryBackend*> SharedBackend(const std::string& name) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* started =
      new std::map<std::string,
                   absl::StatusOr<std::unique_ptr<HistoryBackend>>>;
  absl::MutexLock lock(&mu);
  auto it = started->find(name);
  if (it == started->end()) {
    it = started->emplace(name, StartBackend(name)).first;
  }
  if (!it->second.ok()) return it->second.status();
  return it->second->get();
}

}  // namespace dlock::test
