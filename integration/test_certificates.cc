#include "test_certificates.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server_process.h"

namespace dlock::testing {
namespace {

constexpr char kOpenSsl[] = "/usr/bin/openssl";

bool IsIpAddress(const std::string& name) {
  unsigned char buf[16];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 ||
         inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TestCertificates>> TestCertificates::Start(
    const std::string& name) {
  if (absl::Status s = RequireExecutable(kOpenSsl, "openssl"); !s.ok()) {
    return s;
  }
  std::unique_ptr<TestCertificates> certs(new TestCertificates);
  absl::StatusOr<std::string> dir = MakeTempDir("dlock-certs");
  if (!dir.ok()) return dir.status();
  certs->dir_ = *dir;
  certs->ca_file_ = *dir + "/ca.pem";
  certs->ca_key_ = *dir + "/ca.key";
  if (absl::Status s = certs->OpenSsl(
          {"req", "-x509", "-newkey", "ec", "-pkeyopt",
           "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", certs->ca_key_,
           "-out", certs->ca_file_, "-days", "2", "-subj", "/CN=" + name});
      !s.ok()) {
    return s;
  }
  return certs;
}

TestCertificates::~TestCertificates() { RemoveTree(dir_); }

absl::Status TestCertificates::OpenSsl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kOpenSsl};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunToCompletion(argv, dir_ + "/openssl.log", "", absl::Seconds(60));
}

absl::StatusOr<TestCertificates::Issued> TestCertificates::Issue(
    const std::string& stem, const std::vector<std::string>& names) {
  if (names.empty()) {
    return absl::InvalidArgumentError("a certificate needs a name");
  }
  const std::string base = absl::StrCat(dir_, "/", stem);
  Issued out{base + ".pem", base + ".key"};
  std::vector<std::string> alt;
  for (const std::string& n : names) {
    alt.push_back(absl::StrCat(IsIpAddress(n) ? "IP:" : "DNS:", n));
  }
  {
    std::ofstream ext(base + ".ext");
    ext << "subjectAltName=" << absl::StrJoin(alt, ",") << "\n"
        << "extendedKeyUsage=serverAuth,clientAuth\n";
    if (!ext) return absl::InternalError("cannot write " + base + ".ext");
  }
  if (absl::Status s = OpenSsl({"req", "-new", "-newkey", "ec", "-pkeyopt",
                                "ec_paramgen_curve:prime256v1", "-nodes",
                                "-keyout", out.key_file, "-out", base + ".csr",
                                "-subj", "/CN=" + names[0]});
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          OpenSsl({"x509", "-req", "-in", base + ".csr", "-CA", ca_file_,
                   "-CAkey", ca_key_, "-CAcreateserial", "-out", out.cert_file,
                   "-days", "1", "-extfile", base + ".ext"});
      !s.ok()) {
    return s;
  }
  // libpq and the servers refuse a key others may read.
  if (chmod(out.key_file.c_str(), 0600) != 0) {
    return absl::InternalError("cannot chmod " + out.key_file);
  }
  return out;
}

}  // namespace dlock::testing
