// Copyright dlock authors. libFuzzer target: ParseUri, Redacted, SecretPart
// and UriParams on any text; then the text with a password planted in each
// spelling a URI carries one, which no error message, no Redacted() and no
// SecretPart() may show, and which SecretPart() must find.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "dlock/backend/options.h"
#include "dlock/uri.h"
#include "secret_marker.h"

namespace dlock::fuzz {
namespace {

// Every accessor on a URI whatever it holds: none may crash.
void Exercise(absl::string_view text) {
  absl::StatusOr<Uri> uri = ParseUri(text);
  if (!uri.ok()) return;
  (void)uri->Redacted();
  (void)uri->SecretPart();
  UriParams params(*uri);
  (void)TakeCommonOptions(params);
  for (const auto& [key, value] : uri->params) {
    UriParams typed(*uri);
    (void)typed.TakeDuration(key);
    (void)typed.TakeInt(key, -5, 1000);
    (void)typed.RejectUnknown(uri->scheme);
    (void)typed.Rest();
  }
}

void CheckPlanted(const std::string& text) {
  absl::StatusOr<Uri> uri = ParseUri(text);
  if (!uri.ok()) {
    CheckNoMarker(uri.status().message(), "ParseUri's error", text);
    return;
  }
  CheckNoMarker(uri->Redacted(), "Redacted()", text);
  std::optional<std::string> part = uri->SecretPart();
  if (!part.has_value()) {
    std::fprintf(stderr, "SecretPart() missed the password in: %s\n",
                 text.c_str());
    std::abort();
  }
  CheckNoMarker(*part, "SecretPart()", text);
  UriParams params(*uri);
  absl::StatusOr<CommonBackendOptions> common = TakeCommonOptions(params);
  if (!common.ok()) CheckNoMarker(common.status().message(), "an option", text);
  CheckNoMarker(params.RejectUnknown(uri->scheme).message(),
                "an unknown option", text);
}

}  // namespace
}  // namespace dlock::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dlock::fuzz;
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  Exercise(input);
  absl::string_view rest;
  const absl::string_view scheme = PickScheme(input, rest);
  Exercise(std::string(scheme) + "://" + std::string(rest));
  if (MayHoldMarker(rest)) return 0;
  for (const std::string& text : PlantedUris(scheme, rest)) CheckPlanted(text);
  return 0;
}
