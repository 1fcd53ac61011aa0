// postgres:// and postgresql://: the factory the registry calls.
#include <libpq-fe.h>

#include "absl/strings/str_cat.h"
#include "pg_common.h"

namespace dlock::postgres {
namespace {

// PQlibVersion() reads 150018 for 15.18, and 90624 for 9.6.24.
std::string LibpqVersion() {
  const int v = PQlibVersion();
  return v >= 100000
             ? absl::StrCat(v / 10000, ".", v % 10000)
             : absl::StrCat(v / 10000, ".", v / 100 % 100, ".", v % 100);
}

absl::StatusOr<std::unique_ptr<Backend>> MakePostgresBackend(
    const BackendConfig& config) {
  absl::StatusOr<PgOptions> options = ParsePgOptions(config);
  if (!options.ok()) return options.status();
  if (options->mode == Mode::kSession) {
    return NewSessionBackend(*std::move(options), config);
  }
  return NewLeaseBackend(*std::move(options), config);
}

const bool kRegistered = RegisterBackend("postgres", &MakePostgresBackend) &&
                         RegisterBackend("postgresql", &MakePostgresBackend) &&
                         RegisterClientLibrary("libpq", LibpqVersion());

}  // namespace
}  // namespace dlock::postgres
