// Copyright dlock authors. The privileges dlock's statements need on the
// objects its schema makes (docs/postgres.md, "Least privilege"): the GRANT
// lines for a user that may not create tables, the check that names the
// ones a user lacks when a statement is refused, and the grants that
// `dlock setup --grant-to ROLE` gives.
#ifndef DLOCK_BACKENDS_POSTGRES_PG_PRIVILEGES_H_
#define DLOCK_BACKENDS_POSTGRES_PG_PRIVILEGES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pg_conn.h"
#include "pg_options.h"

namespace dlock::postgres {

// Privileges on one object: GRANT <privileges> ON <kind> <object>.
struct Grant {
  std::string privileges;  // "SELECT, INSERT, UPDATE, DELETE"
  std::string kind;        // "TABLE", "SEQUENCE" or "FUNCTION"
  std::string object;      // quoted name; a function with its argument types
};

// What a user of `mode` needs on the schema of `table`. Both modes use every
// table and the sequence; the functions are EXECUTE, which PUBLIC has unless
// an administrator revoked it.
std::vector<Grant> NeededGrants(const std::string& table, Mode mode);

// "GRANT <privileges> ON <kind> <object> TO <role>", `role` already quoted.
std::string GrantStatement(const Grant& grant, const std::string& role);

// The GRANT statements (to the connection's own user) that `conn`'s user
// lacks of `needed`, in one query; objects that do not exist are skipped.
absl::StatusOr<std::vector<std::string>> MissingGrants(
    PgConn& conn, const std::vector<Grant>& needed);

// `denied` (PermissionDenied, from a statement of this schema) with the
// grants the user lacks appended, as MissingGrants() finds them.
absl::Status ExplainDenied(PgConn& conn, const absl::Status& denied,
                           const std::string& table, Mode mode);

// Grants `role` what both modes need (setup, by the schema's owner).
absl::Status GrantTo(PgConn& conn, const std::string& table,
                     const std::string& role);

}  // namespace dlock::postgres

#endif  // DLOCK_BACKENDS_POSTGRES_PG_PRIVILEGES_H_
