// Copyright dlock authors. What the fuzz targets share: a marker password
// planted where a password goes in a URI or a profile, and the check that
// no message and no redacted endpoint ever shows it.
#ifndef DLOCK_TESTS_FUZZ_SECRET_MARKER_H_
#define DLOCK_TESTS_FUZZ_SECRET_MARKER_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace dlock::fuzz {

// Letters and digits only, so that no separator of a URI or TOML splits it.
inline constexpr absl::string_view kMarker = "Zq7s3cr3tMk";

// Whether `text` may hold the marker itself: raw, or once percent escapes
// and TOML's \u escapes are decoded (as ParseUri and a TOML string would).
// The marker may then stand where no password goes (a host, a duration)
// and be quoted by a message that may quote that part.
bool MayHoldMarker(absl::string_view text);

// The URIs `scheme`://... with the marker as the password in each spelling
// a URI carries one: the user info (plain and percent-encoded), and the
// options password=, sslpassword= and auth=digest:USER:PASSWORD. `rest` is
// what follows "scheme://" (hosts, path, query) and must not hold the
// marker (MayHoldMarker).
std::vector<std::string> PlantedUris(absl::string_view scheme,
                                     absl::string_view rest);

// Aborts the fuzzer, naming `what` and `input`, when `text` shows the
// marker.
void CheckNoMarker(absl::string_view text, absl::string_view what,
                   absl::string_view input);

// The first byte of `data` picks a scheme among those dlock registers (and
// one it does not), the rest is returned in `rest`.
absl::string_view PickScheme(absl::string_view data, absl::string_view& rest);

}  // namespace dlock::fuzz

#endif  // DLOCK_TESTS_FUZZ_SECRET_MARKER_H_
