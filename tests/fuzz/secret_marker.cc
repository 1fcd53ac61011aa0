#include "secret_marker.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace dlock::fuzz {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `text` with every %XX and every \uXXXX or \UXXXXXXXX whose value is one
// byte decoded to that byte; anything else kept.
std::string Decoded(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 &&
        HexValue(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(text[i + 1]) * 16 +
                                      HexValue(text[i + 2])));
      i += 2;
      continue;
    }
    const size_t digits = i + 1 < text.size() && text[i] == '\\'
                              ? (text[i + 1] == 'u'   ? 4
                                 : text[i + 1] == 'U' ? 8
                                                      : 0)
                              : 0;
    if (digits > 0 && i + 1 + digits < text.size()) {
      unsigned value = 0;
      bool hex = true;
      for (size_t d = 0; d < digits; ++d) {
        const int v = HexValue(text[i + 2 + d]);
        hex = hex && v >= 0;
        value = value * 16 + (v < 0 ? 0 : v);
      }
      if (hex && value < 0x80) {
        out.push_back(static_cast<char>(value));
        i += 1 + digits;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

std::string PercentEncoded(absl::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    out.push_back('%');
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

}  // namespace

bool MayHoldMarker(absl::string_view text) {
  // Two rounds: a TOML escape may spell a percent escape, and the other way.
  const std::string once = Decoded(text);
  const std::string twice = Decoded(once);
  return absl::StrContains(text, kMarker) || absl::StrContains(once, kMarker) ||
         absl::StrContains(twice, kMarker);
}

std::vector<std::string> PlantedUris(absl::string_view scheme,
                                     absl::string_view rest) {
  const std::string head = std::string(scheme) + "://";
  const std::string r(rest);
  const std::string sep = r.find('?') == std::string::npos ? "?" : "&";
  const std::string marker(kMarker);
  return {
      head + "app:" + marker + "@" + r,
      head + ":" + marker + "@" + r,
      head + "app:" + PercentEncoded(kMarker) + "@" + r,
      head + r + sep + "password=" + marker,
      head + r + sep + "sslpassword=" + marker,
      head + r + sep + "auth=digest:app:" + marker,
      head + r + sep + "auth=digest%3Aapp%3A" + PercentEncoded(kMarker),
  };
}

void CheckNoMarker(absl::string_view text, absl::string_view what,
                   absl::string_view input) {
  if (!absl::StrContains(text, kMarker)) return;
  std::fprintf(
      stderr, "the planted password shows in %.*s: %.*s\ninput: %.*s\n",
      static_cast<int>(what.size()), what.data(), static_cast<int>(text.size()),
      text.data(), static_cast<int>(input.size()), input.data());
  std::abort();
}

absl::string_view PickScheme(absl::string_view data, absl::string_view& rest) {
  // A letter per scheme keeps the seed files readable; any other byte picks
  // one by its value.
  static constexpr std::pair<char, absl::string_view> kSchemes[] = {
      {'r', "redis"},    {'s', "redis-sentinel"}, {'l', "redlock"},
      {'p', "postgres"}, {'q', "postgresql"},     {'z', "zk"},
      {'m', "memory"},   {'x', "nosuch"},
  };
  constexpr size_t kCount = sizeof(kSchemes) / sizeof(kSchemes[0]);
  if (data.empty()) {
    rest = data;
    return kSchemes[0].second;
  }
  rest = data.substr(1);
  for (const auto& [letter, scheme] : kSchemes) {
    if (data[0] == letter) return scheme;
  }
  return kSchemes[static_cast<unsigned char>(data[0]) % kCount].second;
}

}  // namespace dlock::fuzz
