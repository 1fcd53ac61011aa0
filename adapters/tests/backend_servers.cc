#include "backend_servers.h"

#include <memory>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#ifdef DLOCK_TEST_BACKEND_REDIS
#include "redis_server.h"
#endif
#ifdef DLOCK_TEST_BACKEND_ZOOKEEPER
#include "zookeeper_server.h"
#endif
#ifdef DLOCK_TEST_BACKEND_POSTGRES
#include "postgres_server.h"
#endif

namespace dlock::testing {
namespace {

// The shared server of type T, or nullptr after recording a test failure.
template <typename T>
T* Shared(const char* label) {
  static absl::StatusOr<std::unique_ptr<T>> server = T::Start();
  if (!server.ok()) {
    ADD_FAILURE() << "cannot start the " << label
                  << " server: " << server.status();
    return nullptr;
  }
  return server->get();
}

}  // namespace

std::vector<ServerBackend> ServerBackends() {
  std::vector<ServerBackend> backends;
#ifdef DLOCK_TEST_BACKEND_REDIS
  backends.push_back({"redis", [](const std::string& ns) -> std::string {
                        RedisServer* s = Shared<RedisServer>("redis");
                        return s != nullptr ? s->Uri(ns)
                                            : "redis://127.0.0.1:1";
                      }});
#endif
#ifdef DLOCK_TEST_BACKEND_ZOOKEEPER
  backends.push_back({"zookeeper", [](const std::string& ns) -> std::string {
                        ZooKeeperServer* s =
                            Shared<ZooKeeperServer>("zookeeper");
                        return s != nullptr ? s->Uri(ns) : "zk://127.0.0.1:1";
                      }});
#endif
#ifdef DLOCK_TEST_BACKEND_POSTGRES
  backends.push_back({"postgres", [](const std::string& ns) -> std::string {
                        PostgresServer* s = Shared<PostgresServer>("postgres");
                        return s != nullptr ? s->Uri(ns)
                                            : "postgres://127.0.0.1:1/x";
                      }});
#endif
  return backends;
}

}  // namespace dlock::testing
