// Copyright dlock authors. Certificates for servers tests start with TLS,
// made with the openssl command line tool (Debian's openssl package): a CA,
// a server certificate for 127.0.0.1 and localhost, the same gone out of
// date, a client certificate, and a second CA that signed none of them (for
// a client that trusts the wrong CA).
#ifndef DLOCK_INTEGRATION_TLS_CERTIFICATES_H_
#define DLOCK_INTEGRATION_TLS_CERTIFICATES_H_

#include <string>

#include "absl/status/statusor.h"

namespace dlock::test {

// PEM files, all in one directory.
struct TlsCertificates {
  std::string ca;           // the CA that signed the certificates below
  std::string server_cert;  // names IP 127.0.0.1 and DNS localhost
  std::string server_key;
  // The same names and key, signed by the same CA, but its validity ended
  // a day before it was made.
  std::string expired_cert;
  std::string client_cert;  // for servers that ask clients for one
  std::string client_key;
  std::string other_ca;  // a CA that signed nothing here
};

// Writes a fresh set into `dir` (which must exist). FailedPrecondition
// saying what to install when openssl is missing.
absl::StatusOr<TlsCertificates> MakeTlsCertificates(const std::string& dir);

// The process's set, made on first use in a temporary directory that is
// removed when the process exits (servers of one test binary share it).
absl::StatusOr<const TlsCertificates*> SharedTlsCertificates();

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_TLS_CERTIFICATES_H_
