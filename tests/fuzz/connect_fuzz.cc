// Copyright dlock authors. libFuzzer target: dlock::Connect() on URIs of
// every scheme, so that each backend parses its options, with every server
// on a loopback port where nothing listens (127.x.y.z:1, [::1]:1): a
// connection is refused at once, and no input reaches a real server. A
// password planted in each spelling a URI carries one must show in no
// status message and no endpoint.
#include <arpa/inet.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "dlock/client.h"
#include "dlock/uri.h"
#include "secret_marker.h"

namespace dlock::fuzz {
namespace {

// Whether Connect(uri) can only dial loopback port 1 (or nothing): every
// host named with that port, and no libpq option that picks another host,
// port, socket or service file.
bool DialsNothingReal(const Uri& uri) {
  if (uri.scheme == "memory") return true;
  if (uri.hosts.empty()) return false;  // a backend's default host and port
  for (const HostPort& hp : uri.hosts) {
    in_addr v4;  // a literal, so that no name is looked up
    const bool loopback =
        hp.host == "::1" || (inet_pton(AF_INET, hp.host.c_str(), &v4) == 1 &&
                             absl::StartsWith(hp.host, "127."));
    if (!loopback || hp.port != 1) return false;
  }
  for (const auto& [key, value] : uri.params) {
    const std::string k = absl::AsciiStrToLower(key);
    if (k == "host" || k == "hostaddr" || k == "port" || k == "service") {
      return false;
    }
  }
  return true;
}

void TryConnect(const std::string& text, bool planted) {
  absl::StatusOr<Uri> parsed = ParseUri(text);
  if (!parsed.ok()) {
    if (planted) CheckNoMarker(parsed.status().message(), "an error", text);
    return;
  }
  if (!DialsNothingReal(*parsed)) return;
  // ZooKeeper waits out the connect timeout for a session: keep it short.
  const std::string bounded =
      text + (text.find('?') == std::string::npos ? "?" : "&") +
      "connect_timeout=20ms";
  absl::StatusOr<std::unique_ptr<LockClient>> client = Connect(bounded);
  if (!client.ok()) {
    if (planted) {
      CheckNoMarker(client.status().message(), "Connect()'s error", bounded);
    }
    return;
  }
  if (planted) CheckNoMarker((*client)->endpoint(), "endpoint()", bounded);
  (void)(*client)->Close();
}

}  // namespace
}  // namespace dlock::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dlock::fuzz;
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  absl::string_view rest;
  const absl::string_view scheme = PickScheme(input, rest);
  TryConnect(std::string(scheme) + "://" + std::string(rest), false);
  if (MayHoldMarker(rest)) return 0;
  for (const std::string& text : PlantedUris(scheme, rest)) {
    TryConnect(text, true);
  }
  return 0;
}
