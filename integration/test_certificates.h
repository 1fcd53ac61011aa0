// Copyright dlock authors. Throwaway TLS certificates for tests, made with
// the openssl command line tool: a CA, a server certificate it signed for
// 127.0.0.1 and localhost, an expired one, a client certificate, and a
// second CA that signed none of them.
#ifndef DLOCK_INTEGRATION_TEST_CERTIFICATES_H_
#define DLOCK_INTEGRATION_TEST_CERTIFICATES_H_

#include <string>

#include "absl/status/statusor.h"

namespace dlock::testing {

// PEM files, each a path; every key is unencrypted.
struct TestCertificates {
  std::string dir;
  std::string ca;  // the CA that signed the certificates below
  // Subject CN=localhost, subjectAltName IP:127.0.0.1 and DNS:localhost.
  std::string server_cert;
  std::string server_key;
  // The same subject and names, signed by the same CA, but its validity
  // ended a day before it was made.
  std::string expired_cert;  // its key is server_key
  // Subject CN=dlock test client, for servers that ask for one.
  std::string client_cert;
  std::string client_key;
  // A CA that signed none of the above ("a wrong CA").
  std::string other_ca;
};

// The process's certificates, made on first use in a temporary directory
// that is removed when the process exits. Fails, saying what to install,
// when the openssl tool is missing.
absl::StatusOr<const TestCertificates*> SharedTestCertificates();

}  // namespace dlock::testing

#endif  // DLOCK_INTEGRATION_TEST_CERTIFICATES_H_
