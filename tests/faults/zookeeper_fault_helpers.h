// Copyright dlock authors. What the zk:// fault tests share: URIs through a
// FaultProxy, a plain C-client view of a lock's queue, and calls run on their
// own thread so that a test can bound how long they take.
#ifndef DLOCK_TESTS_FAULTS_ZOOKEEPER_FAULT_HELPERS_H_
#define DLOCK_TESTS_FAULTS_ZOOKEEPER_FAULT_HELPERS_H_

// The synchronous C API, which zookeeper_mt provides, is declared only for
// THREADED builds.
#ifndef THREADED
#define THREADED
#endif
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dlock::test {

// zk://127.0.0.1:<port>?namespace=<ns>[&<extra>]: a client that reaches
// ZooKeeper through the proxy listening on `port`.
inline std::string UriAt(int port, const std::string& ns,
                         const std::string& extra = "") {
  return absl::StrCat("zk://127.0.0.1:", port, "?namespace=", ns,
                      extra.empty() ? "" : "&", extra);
}

// A plain C-client session, as any other program on the ensemble would have:
// it sees the nodes themselves, not what a dlock client makes of them.
class RawZooKeeper {
 public:
  explicit RawZooKeeper(const std::string& hosts) {
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zh_ = zookeeper_init(hosts.c_str(), &IgnoreEvents, 10000, nullptr, nullptr,
                         0);
    for (int i = 0; i < 400 && zoo_state(zh_) != ZOO_CONNECTED_STATE; ++i) {
      absl::SleepFor(absl::Milliseconds(25));
    }
  }
  ~RawZooKeeper() { zookeeper_close(zh_); }
  RawZooKeeper(const RawZooKeeper&) = delete;
  RawZooKeeper& operator=(const RawZooKeeper&) = delete;

  // The children of `path`; empty when it has none or does not exist.
  std::vector<std::string> Children(const std::string& path) {
    String_vector children{};
    std::vector<std::string> out;
    if (zoo_get_children(zh_, path.c_str(), 0, &children) != ZOK) return out;
    for (int i = 0; i < children.count; ++i) out.push_back(children.data[i]);
    deallocate_String_vector(&children);
    return out;
  }

  // Creates `path` and the nodes above it that are missing, persistent and
  // open; true when it exists afterwards.
  bool CreatePath(const std::string& path) {
    int rc = ZOK;
    for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
      const std::string prefix = path.substr(0, slash);
      rc = zoo_create(zh_, prefix.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0,
                      nullptr, 0);
      if (slash == std::string::npos) break;
    }
    return rc == ZOK || rc == ZNODEEXISTS;
  }

  // Waits until `path` has `count` children; false after `timeout`.
  bool WaitForChildren(const std::string& path, size_t count,
                       absl::Duration timeout) {
    const absl::Time give_up = absl::Now() + timeout;
    while (Children(path).size() != count) {
      if (absl::Now() >= give_up) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return true;
  }

 private:
  static void IgnoreEvents(zhandle_t*, int, int, const char*, void*) {}
  zhandle_t* zh_;
};

// The parent node of a lock whose name is made of letters, digits and '-'
// only (those stay as they are in the path, docs/zookeeper.md).
inline std::string LockParent(const std::string& ns, const std::string& name) {
  return absl::StrCat("/dlock/", ns, "/", name);
}

// A call running on its own thread. The destructor waits for it: a test that
// gives up on a hung call must first make it return (cancel it, heal the
// network).
template <typename T>
class Background {
 public:
  explicit Background(std::function<T()> call)
      : result_(std::async(std::launch::async, std::move(call))) {}

  // The call's result once it returned, or null if it is still running
  // after `timeout`. The result stays this object's (a Hold in it is kept
  // until the Background goes), so the pointer is good as long as it is.
  T* Wait(absl::Duration timeout) {
    if (!value_.has_value() && result_.wait_for(absl::ToChronoMilliseconds(
                                   timeout)) == std::future_status::ready) {
      value_ = result_.get();
    }
    return value_.has_value() ? &*value_ : nullptr;
  }
  bool Done() { return Wait(absl::ZeroDuration()) != nullptr; }

 private:
  std::future<T> result_;
  std::optional<T> value_;
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_FAULTS_ZOOKEEPER_FAULT_HELPERS_H_
