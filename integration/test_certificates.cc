#include "test_certificates.h"

#include <filesystem>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "server_process.h"

namespace dlock::testing {
namespace {

constexpr char kOpenssl[] = "/usr/bin/openssl";

// Every file in one script: the tool runs once per file, and a failure
// stops it (set -e) with the reason in the log. EC keys (P-256) take
// milliseconds to make, RSA ones far longer.
std::string Script(const TestCertificates& c) {
  const std::string key =
      "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out";
  const std::string ca_ext =
      "-addext basicConstraints=critical,CA:TRUE "
      "-addext keyUsage=critical,keyCertSign,cRLSign";
  const std::string sign = absl::StrCat("openssl x509 -req -CA '", c.ca,
                                        "' -CAkey ca.key -CAcreateserial");
  return absl::StrCat(
      "set -e; cd '", c.dir, "'\n",
      // The CA, and another one that signs nothing of ours.
      key, " ca.key\n",
      "openssl req -x509 -new -key ca.key -days 30 -subj '/CN=dlock test CA' ",
      ca_ext, " -out '", c.ca, "'\n",  //
      key, " other-ca.key\n",
      "openssl req -x509 -new -key other-ca.key -days 30 ",
      "-subj '/CN=dlock other test CA' ", ca_ext, " -out '", c.other_ca, "'\n",
      // The server's certificate, and the same gone out of date: valid
      // until a day before it was made.
      key, " '", c.server_key, "'\n", "openssl req -new -key '", c.server_key,
      "' -subj /CN=localhost -out server.csr\n",
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext\n",
      sign, " -in server.csr -days 30 -extfile server.ext -out '",
      c.server_cert, "'\n",  //
      sign, " -in server.csr -days -1 -extfile server.ext -out '",
      c.expired_cert, "'\n",
      // The client's.
      key, " '", c.client_key, "'\n", "openssl req -new -key '", c.client_key,
      "' -subj '/CN=dlock test client' -out client.csr\n",  //
      sign, " -in client.csr -days 30 -out '", c.client_cert, "'\n");
}

absl::StatusOr<std::unique_ptr<TestCertificates>> Make() {
  if (absl::Status s = RequireExecutable(kOpenssl, "openssl"); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> dir = MakeTempDir("dlock-certs");
  if (!dir.ok()) return dir.status();
  auto c = std::make_unique<TestCertificates>();
  c->dir = *dir;
  c->ca = *dir + "/ca.pem";
  c->server_cert = *dir + "/server.pem";
  c->server_key = *dir + "/server.key";
  c->expired_cert = *dir + "/expired.pem";
  c->client_cert = *dir + "/client.pem";
  c->client_key = *dir + "/client.key";
  c->other_ca = *dir + "/other-ca.pem";
  const std::string log = *dir + "/openssl.log";
  ChildProcess openssl;
  if (absl::Status s = openssl.Spawn({"/bin/sh", "-c", Script(*c)}, log);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          WaitUntil([&] { return !openssl.Running(); }, absl::Seconds(60),
                    "openssl making certificates", log);
      !s.ok()) {
    return s;
  }
  // The script stops at the first failure: the last file tells.
  if (!std::filesystem::exists(c->client_cert)) {
    return absl::InternalError(
        absl::StrCat("openssl could not make the test certificates; end of ",
                     log, ":\n", FileTail(log)));
  }
  return c;
}

// Removes the directory when the process exits.
struct Made {
  absl::StatusOr<std::unique_ptr<TestCertificates>> certificates;
  ~Made() {
    if (certificates.ok()) RemoveTree((*certificates)->dir);
  }
};

}  // namespace

absl::StatusOr<const TestCertificates*> SharedTestCertificates() {
  static std::once_flag once;
  static Made made;
  std::call_once(once, [] { made.certificates = Make(); });
  if (!made.certificates.ok()) return made.certificates.status();
  return made.certificates->get();
}

}  // namespace dlock::testing
