#include "dlock/duration.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace dlock {
namespace {

constexpr char kHowToWrite[] = "write it like 500ms, 30s, 2m, 1h or 1d";

enum class Parsed { kOk, kMalformed, kTooLong };

bool IsUnit(absl::string_view unit) {
  return unit == "ns" || unit == "us" || unit == "ms" || unit == "s" ||
         unit == "m" || unit == "h" || unit == "d";
}

// "12" or "1.5": digits, then at most one '.' followed by digits.
bool IsNumber(absl::string_view number) {
  const size_t dot = number.find('.');
  const absl::string_view whole = number.substr(0, dot);
  if (whole.empty()) return false;
  for (char c : whole) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  if (dot == absl::string_view::npos) return true;
  const absl::string_view fraction = number.substr(dot + 1);
  if (fraction.empty()) return false;
  for (char c : fraction) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

// One <number><unit> term off the front of `text`. A number too large for
// absl::Duration is kTooLong, not malformed: it is a duration, out of range.
Parsed TakeTerm(absl::string_view& text, absl::Duration& term) {
  size_t unit_start = 0;
  while (unit_start < text.size() &&
         (absl::ascii_isdigit(text[unit_start]) || text[unit_start] == '.')) {
    ++unit_start;
  }
  size_t unit_end = unit_start;
  while (unit_end < text.size() && absl::ascii_isalpha(text[unit_end])) {
    ++unit_end;
  }
  const absl::string_view number = text.substr(0, unit_start);
  const absl::string_view unit = text.substr(unit_start, unit_end - unit_start);
  text.remove_prefix(unit_end);
  if (!IsNumber(number) || !IsUnit(unit)) return Parsed::kMalformed;
  // absl parses every unit but days; a day is 24 hours (UTC has no DST).
  const bool days = unit == "d";
  if (!absl::ParseDuration(absl::StrCat(number, days ? "h" : unit), &term)) {
    return Parsed::kTooLong;
  }
  if (days) term *= 24;  // saturates at InfiniteDuration
  return term == absl::InfiniteDuration() ? Parsed::kTooLong : Parsed::kOk;
}

Parsed ParseTerms(absl::string_view text, absl::Duration& out) {
  out = absl::ZeroDuration();
  if (text == "0") return Parsed::kOk;
  if (text.empty()) return Parsed::kMalformed;
  Parsed result = Parsed::kOk;
  while (!text.empty()) {
    absl::Duration term;
    const Parsed parsed = TakeTerm(text, term);
    if (parsed == Parsed::kMalformed) return parsed;
    if (parsed == Parsed::kTooLong) result = parsed;  // keep checking syntax
    out += term;
  }
  if (out == absl::InfiniteDuration()) result = Parsed::kTooLong;
  return result;
}

// `d` to the nearest multiple of `unit`.
absl::Duration Rounded(absl::Duration d, absl::Duration unit) {
  return absl::Trunc(d + unit / 2, unit);
}

}  // namespace

absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text,
                                             DurationRange range) {
  absl::Duration d;
  const Parsed parsed = ParseTerms(text, d);
  if (parsed == Parsed::kMalformed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "' is not a ",
        range.min > absl::ZeroDuration() ? "positive duration" : "duration",
        "; ", kHowToWrite));
  }
  if (parsed == Parsed::kOk && d >= range.min && d <= range.max) return d;
  if (parsed == Parsed::kOk && d <= absl::ZeroDuration() &&
      range.min <= absl::Nanoseconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a positive duration; ", kHowToWrite,
                     " (at most ", FormatDurationForPeople(range.max), ")"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", text, "' is out of range: give a duration ",
                   DurationRangeText(range)));
}

std::string DurationRangeText(DurationRange range) {
  return absl::StrCat("from ", FormatDurationForPeople(range.min), " to ",
                      FormatDurationForPeople(range.max));
}

std::string FormatDurationForPeople(absl::Duration d) {
  if (d == absl::InfiniteDuration()) return "forever";
  if (d < absl::ZeroDuration()) {
    return absl::StrCat("-", FormatDurationForPeople(-d));
  }
  if (d >= absl::Milliseconds(1)) {
    const absl::Duration unit = d < absl::Seconds(1)   ? absl::Milliseconds(1)
                                : d < absl::Minutes(1) ? absl::Milliseconds(100)
                                : d < absl::Hours(1)   ? absl::Seconds(1)
                                                       : absl::Minutes(1);
    d = Rounded(d, unit);
  }
  const int64_t days = absl::IDivDuration(d, absl::Hours(24), &d);
  if (days == 0) return absl::FormatDuration(d);
  if (d == absl::ZeroDuration()) return absl::StrCat(days, "d");
  return absl::StrCat(days, "d", absl::FormatDuration(d));
}

}  // namespace dlock
