#include "pg_privileges.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace dlock::postgres {
namespace {

std::string Quoted(const std::string& name) {
  return absl::StrCat("\"", name, "\"");
}

constexpr char kSeeDocs[] =
    "docs/postgres.md, \"Least privilege\", lists what dlock needs; an "
    "administrator can grant it with `dlock setup --backend <admin URI> "
    "--grant-to <user>`";

}  // namespace

std::vector<Grant> NeededGrants(const std::string& table, Mode mode) {
  const std::string fn = table + "_s_";
  std::vector<Grant> out = {
      {"SELECT, INSERT, UPDATE, DELETE", "TABLE", Quoted(table)},
      {"SELECT, INSERT, UPDATE, DELETE", "TABLE", Quoted(table + "_liveness")},
      {"SELECT", "TABLE", Quoted(table + "_meta")},
      {"USAGE", "SEQUENCE", Quoted(table + "_fencing")},
      {"EXECUTE", "FUNCTION", Quoted(fn + "next_token") + "()"},
      {"EXECUTE", "FUNCTION", Quoted(fn + "any_live") + "(text[])"},
      // Version 7: semaphores and elections, both modes.
      {"SELECT, INSERT, UPDATE, DELETE", "TABLE", Quoted(table + "_holders")},
  };
  for (const char* f :
       {"alive\"(bigint)", "purge\"(text, text)", "lock_row\"(text, text)",
        "holders_left\"(text, text)",
        "hold\"(text, text, text, bigint, bigint, bigint, text, bigint, "
        "bigint, boolean, bigint)",
        "sem_acquire\"(text, text, text, bigint, boolean, text, bigint, "
        "bigint, bigint, bigint, boolean, boolean, bigint)",
        "sem_release\"(text, text, text, bigint, text, boolean)",
        "holder_renew\"(text, text, text, bigint, boolean)",
        "holders_force\"(text, text, bigint, text)",
        "campaign\"(text, text, text, bigint, text, bigint, bytea, text)",
        "s_campaign\"(text, text, text, bigint, boolean, bigint, bytea, "
        "text)",
        "acquire_all\"(text, text[], text, bigint, text, bigint)",
        // Version 8: read-write locks.
        "mark_readers\"(text, text)",
        "read_acquire\"(text, text, text, bigint, boolean, text, bigint, "
        "boolean, boolean, bigint)",
        "read_release\"(text, text, text, bigint, text, boolean)",
        "read_renew\"(text, text, text, bigint, boolean)",
        "write_acquire\"(text, text, text, bigint, boolean, text, bigint, "
        "bigint, bigint, bigint)",
        "take_off\"(text, text, text, bigint, boolean)",
        "write_release\"(text, text, text, bigint, text)"}) {
    out.push_back({"EXECUTE", "FUNCTION", absl::StrCat("\"", fn, f)});
  }
  if (mode == Mode::kSession) {
    for (const char* f :
         {"acquire\"(text, text, text, bigint, boolean, bigint)",
          "owned\"(text, text, text, boolean)",
          "release\"(text, text, text, bigint, boolean, boolean, text, bigint)",
          "renew\"(text, text, text, bigint, boolean)",
          "s_write_acquire\"(text, text, text, bigint, boolean, bigint, "
          "boolean, bigint)",
          "s_write_release\"(text, text, text, bigint, boolean, boolean, "
          "text, bigint)"}) {
      out.push_back({"EXECUTE", "FUNCTION", absl::StrCat("\"", fn, f)});
    }
  }
  return out;
}

std::string GrantStatement(const Grant& grant, const std::string& role) {
  return absl::StrCat("GRANT ", grant.privileges, " ON ", grant.kind, " ",
                      grant.object, " TO ", role);
}

absl::StatusOr<std::vector<std::string>> MissingGrants(
    PgConn& conn, const std::vector<Grant>& needed) {
  // One row per object and single privilege (has_*_privilege reads a list
  // as "any of"). Every name is a validated identifier, quoted, and no
  // signature holds a quote: the literals below cannot be escaped from.
  std::vector<std::string> rows;
  for (size_t g = 0; g < needed.size(); ++g) {
    for (absl::string_view p : absl::StrSplit(needed[g].privileges, ", ")) {
      rows.push_back(absl::StrCat("(", g, ", '", needed[g].kind, "', '",
                                  needed[g].object, "', '", p, "')"));
    }
  }
  const Statement check{
      "dlock_missing_grants",
      absl::StrCat(
          "SELECT quote_ident(current_user), g.i, g.privilege FROM (VALUES ",
          absl::StrJoin(rows, ", "),
          ") AS g(i, kind, object, privilege) WHERE NOT COALESCE(CASE g.kind "
          "WHEN 'TABLE' THEN has_table_privilege(to_regclass(g.object), "
          "g.privilege) WHEN 'SEQUENCE' THEN "
          "has_sequence_privilege(to_regclass(g.object), g.privilege) ELSE "
          "has_function_privilege(to_regprocedure(g.object), g.privilege) "
          "END, true) ORDER BY g.i")};
  absl::StatusOr<PgResult> r = conn.Run(check, {});
  if (!r.ok()) return r.status();
  // Privileges lacking, by object, in the order of `needed`.
  std::map<int64_t, std::vector<std::string>> lacking;
  std::string user;
  for (int row = 0; row < PQntuples(r->get()); ++row) {
    user = GetText(r->get(), row, 0);
    lacking[GetInt(r->get(), row, 1)].push_back(GetText(r->get(), row, 2));
  }
  std::vector<std::string> out;
  for (const auto& [g, privileges] : lacking) {
    Grant missing = needed[g];
    missing.privileges = absl::StrJoin(privileges, ", ");
    out.push_back(GrantStatement(missing, user));
  }
  return out;
}

absl::Status ExplainDenied(PgConn& conn, const absl::Status& denied,
                           const std::string& table, Mode mode) {
  absl::StatusOr<std::vector<std::string>> missing =
      MissingGrants(conn, NeededGrants(table, mode));
  if (!missing.ok() || missing->empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat(denied.message(), "; ", kSeeDocs));
  }
  return absl::PermissionDeniedError(absl::StrCat(
      denied.message(), "; missing: ", absl::StrJoin(*missing, "; "), " (",
      kSeeDocs, ")"));
}

absl::Status GrantTo(PgConn& conn, const std::string& table,
                     const std::string& role) {
  char* quoted = PQescapeIdentifier(conn.raw(), role.data(), role.size());
  if (quoted == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot quote the role name '", role, "'"));
  }
  const std::string to = quoted;
  PQfreemem(quoted);
  std::vector<std::string> statements;
  for (const Grant& g : NeededGrants(table, Mode::kSession)) {
    statements.push_back(GrantStatement(g, to));
  }
  absl::Status s = conn.Exec(
      absl::StrCat("BEGIN; ", absl::StrJoin(statements, "; "), "; COMMIT"));
  if (!s.ok()) {
    conn.Exec("ROLLBACK").IgnoreError();
    return absl::Status(
        s.code(),
        absl::StrCat("granting ", role, " what dlock needs: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace dlock::postgres
