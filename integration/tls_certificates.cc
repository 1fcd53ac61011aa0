#include "tls_certificates.h"

#include <fstream>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server_process.h"

namespace dlock::test {
namespace {

constexpr char kOpenssl[] = "/usr/bin/openssl";

// A self-signed CA (OpenSSL's default config marks it CA:TRUE).
absl::Status MakeCa(const std::string& dir, const std::string& name,
                    const std::string& subject) {
  return RunCommand({kOpenssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                     "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                     absl::StrCat(dir, "/", name, ".key"), "-out",
                     absl::StrCat(dir, "/", name, ".crt"), "-days", "3650",
                     "-subj", subject})
      .status();
}

// A key and a certificate `name`.crt signed by ca.crt, with the extensions
// in `extensions` (an openssl extfile's lines).
absl::Status MakeSigned(const std::string& dir, const std::string& name,
                        const std::string& subject,
                        const std::string& extensions) {
  const std::string base = absl::StrCat(dir, "/", name);
  std::ofstream ext(base + ".ext");
  ext << extensions;
  ext.close();
  if (!ext)
    return absl::InternalError(absl::StrCat("cannot write ", base, ".ext"));
  absl::Status s =
      RunCommand({kOpenssl, "req", "-newkey", "ec", "-pkeyopt",
                  "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                  base + ".key", "-out", base + ".csr", "-subj", subject})
          .status();
  if (!s.ok()) return s;
  return RunCommand({kOpenssl, "x509", "-req", "-in", base + ".csr", "-CA",
                     dir + "/ca.crt", "-CAkey", dir + "/ca.key",
                     "-CAcreateserial", "-out", base + ".crt", "-days", "3650",
                     "-extfile", base + ".ext"})
      .status();
}

// server.csr signed again, valid until a day before now.
absl::Status MakeExpiredServer(const std::string& dir) {
  return RunCommand({kOpenssl, "x509", "-req", "-in", dir + "/server.csr",
                     "-CA", dir + "/ca.crt", "-CAkey", dir + "/ca.key",
                     "-CAcreateserial", "-out", dir + "/expired.crt", "-days",
                     "-1", "-extfile", dir + "/server.ext"})
      .status();
}

// The shared set, and its directory removed at exit.
struct Shared {
  std::string dir;
  absl::StatusOr<TlsCertificates> certificates =
      absl::UnknownError("not made yet");
  ~Shared() {
    if (!dir.empty()) RemoveTree(dir);
  }
};

}  // namespace

absl::StatusOr<TlsCertificates> MakeTlsCertificates(const std::string& dir) {
  if (absl::Status s = RequireExecutable(kOpenssl, "openssl"); !s.ok()) {
    return s;
  }
  const std::vector<absl::Status> steps = {
      MakeCa(dir, "ca", "/CN=dlock test CA"),
      MakeCa(dir, "other-ca", "/CN=dlock test CA that signed nothing"),
      MakeSigned(dir, "server", "/CN=dlock test server",
                 "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                 "extendedKeyUsage=serverAuth,clientAuth\n"),
      MakeExpiredServer(dir),
      MakeSigned(dir, "client", "/CN=dlock test client",
                 "extendedKeyUsage=clientAuth\n"),
  };
  for (const absl::Status& s : steps) {
    if (!s.ok()) return s;
  }
  return TlsCertificates{.ca = dir + "/ca.crt",
                         .server_cert = dir + "/server.crt",
                         .server_key = dir + "/server.key",
                         .expired_cert = dir + "/expired.crt",
                         .client_cert = dir + "/client.crt",
                         .client_key = dir + "/client.key",
                         .other_ca = dir + "/other-ca.crt"};
}

absl::StatusOr<const TlsCertificates*> SharedTlsCertificates() {
  static std::once_flag once;
  static Shared shared;
  std::call_once(once, [] {
    absl::StatusOr<std::string> dir = MakeTempDir("dlock-certs");
    if (!dir.ok()) {
      shared.certificates = dir.status();
      return;
    }
    shared.dir = *dir;
    shared.certificates = MakeTlsCertificates(*dir);
  });
  if (!shared.certificates.ok()) return shared.certificates.status();
  return &*shared.certificates;
}

}  // namespace dlock::test
