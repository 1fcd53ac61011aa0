// postgres:// and postgresql://: the factory the registry calls.
#include "pg_common.h"

namespace dlock::postgres {
namespace {

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
                         RegisterBackend("postgresql", &MakePostgresBackend);

}  // namespace
}  // namespace dlock::postgres
