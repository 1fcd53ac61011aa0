// Copyright dlock authors. What the PostgreSQL backend makes of a URI, for
// its own tests: the URI's common options taken by the core as Connect()
// does, the rest parsed by ParsePgOptions().
#ifndef DLOCK_BACKENDS_POSTGRES_TESTS_PARSE_PG_OPTIONS_H_
#define DLOCK_BACKENDS_POSTGRES_TESTS_PARSE_PG_OPTIONS_H_

#include <string>

#include "absl/status/statusor.h"
#include "dlock/backend/backend.h"
#include "dlock/uri.h"
#include "pg_options.h"

namespace dlock::postgres {

inline absl::StatusOr<PgOptions> Parse(const std::string& text) {
  absl::StatusOr<Uri> uri = ParseUri(text);
  if (!uri.ok()) return uri.status();
  UriParams params(*uri);
  params.TakeString("namespace");
  absl::StatusOr<CommonBackendOptions> common = TakeCommonOptions(params);
  if (!common.ok()) return common.status();
  const ClientOptions options;
  return ParsePgOptions(BackendConfig{.uri = *uri,
                                      .params = params,
                                      .options = options,
                                      .lock_namespace = "default",
                                      .client_id = "",
                                      .endpoint = "",
                                      .listener = nullptr,
                                      .clock = Clock::Real(),
                                      .common = *common});
}

}  // namespace dlock::postgres

#endif  // DLOCK_BACKENDS_POSTGRES_TESTS_PARSE_PG_OPTIONS_H_
