// Copyright dlock authors. libFuzzer target: the TOML profile loader
// (ParseConfig) on any text; then a profile whose backend URI carries a
// password planted in each spelling a URI carries one, followed by the
// text: such a file must be refused, and no message may show the password.
//
// Input: the first line is a scheme letter and the rest of a backend URI
// (secret_marker.h, PickScheme); the lines after it are TOML.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "dlock/adapters/config.h"
#include "secret_marker.h"

namespace dlock::fuzz {
namespace {

// `text` as the inside of a TOML basic string.
std::string TomlEscaped(absl::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\u00";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

void Exercise(absl::string_view text) {
  absl::StatusOr<Config> config = ParseConfig(text, "fuzz.toml");
  if (!config.ok()) return;
  for (const auto& [name, profile] : config->profiles) {
    (void)profile.DisplayBackend();
  }
  (void)config->Find(config->default_profile);
}

}  // namespace
}  // namespace dlock::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dlock::fuzz;
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  Exercise(input);
  const size_t newline = input.find('\n');
  const absl::string_view first_line = input.substr(0, newline);
  const absl::string_view toml =
      newline == input.npos ? absl::string_view() : input.substr(newline + 1);
  Exercise(toml);
  if (MayHoldMarker(input)) return 0;
  absl::string_view rest;
  const absl::string_view scheme = PickScheme(first_line, rest);
  for (const std::string& uri : PlantedUris(scheme, rest)) {
    const std::string text = "[profiles.p]\nbackend = \"" + TomlEscaped(uri) +
                             "\"\n" + std::string(toml);
    absl::StatusOr<dlock::Config> config =
        dlock::ParseConfig(text, "fuzz.toml");
    if (config.ok()) {
      std::fprintf(stderr, "a profile holding a password was accepted:\n%s\n",
                   text.c_str());
      std::abort();
    }
    CheckNoMarker(config.status().message(), "ParseConfig's error", text);
  }
  return 0;
}
