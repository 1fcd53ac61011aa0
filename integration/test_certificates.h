// Copyright dlock authors. Certificates for TLS tests, made with the openssl
// command line (Debian's openssl) in a temporary directory: a CA of the
// test's own, and certificates it signs for chosen names. Keys are P-256
// (fast to make), written 0600.
#ifndef DLOCK_INTEGRATION_TEST_CERTIFICATES_H_
#define DLOCK_INTEGRATION_TEST_CERTIFICATES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dlock::testing {

class TestCertificates {
 public:
  struct Issued {
    std::string cert_file;  // PEM
    std::string key_file;   // PEM, mode 0600
  };

  // A fresh CA named `name` (its subject's CN) in a directory of its own.
  // FailedPrecondition naming the package when openssl is missing.
  static absl::StatusOr<std::unique_ptr<TestCertificates>> Start(
      const std::string& name = "dlock test CA");
  ~TestCertificates();  // removes the directory

  const std::string& ca_file() const { return ca_file_; }
  // A certificate signed by this CA, valid for a day, for `names`: the
  // first is its subject's CN (a client certificate's user name); each is a
  // subjectAltName, an IP address when it parses as one, else a DNS name.
  // Files <dir>/<stem>.pem and <dir>/<stem>.key.
  absl::StatusOr<Issued> Issue(const std::string& stem,
                               const std::vector<std::string>& names);

 private:
  TestCertificates() = default;
  // Runs openssl with `args`, its output in <dir>/openssl.log.
  absl::Status OpenSsl(const std::vector<std::string>& args);

  std::string dir_;
  std::string ca_file_;
  std::string ca_key_;
};

}  // namespace dlock::testing

#endif  // DLOCK_INTEGRATION_TEST_CERTIFICATES_H_
