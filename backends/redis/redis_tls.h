// Copyright dlock authors. TLS under the Redis transport (OpenSSL): the
// client context a URI's tls_* options make, and the handshake that turns a
// connected socket into a TLS Stream (redis_transport.h).
#ifndef DLOCK_BACKENDS_REDIS_REDIS_TLS_H_
#define DLOCK_BACKENDS_REDIS_REDIS_TLS_H_

#include <openssl/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "redis_transport.h"

namespace dlock::redis {

struct TlsOptions {
  std::string ca_file;    // tls_ca: PEM CA certificates; empty: the system's
  std::string cert_file;  // tls_cert: this client's PEM certificate (chain)
  std::string key_file;   // tls_key: its private key, PEM, unencrypted
  // tls_insecure_skip_verify: the server's certificate and name unchecked.
  bool insecure_skip_verify = false;
};

// What every connection of a client shares: its trusted CAs, its own
// certificate, whether servers are checked. Thread-safe once made.
class TlsContext {
 public:
  // InvalidArgument naming the option and the file that cannot be used
  // (unreadable, not PEM, a key that does not match the certificate, an
  // encrypted key: dlock never prompts for a passphrase).
  static absl::StatusOr<std::shared_ptr<const TlsContext>> Create(
      const TlsOptions& options);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* ssl_ctx() const { return ctx_; }
  bool verifies() const { return verifies_; }
  bool has_client_certificate() const { return has_client_certificate_; }
  bool uses_system_cas() const { return uses_system_cas_; }

 private:
  TlsContext(SSL_CTX* ctx, const TlsOptions& options);

  SSL_CTX* const ctx_;
  const bool verifies_;
  const bool has_client_certificate_;
  const bool uses_system_cas_;
};

// The TLS handshake over `fd`, a connected non-blocking TCP socket to
// `host`, which the stream owns from now on (closed on failure too). The
// server's certificate must chain to the context's CAs and carry the name
// checked (tls.server_name, else `host`; an IP address is matched against
// the certificate's IP addresses), unless the context does not verify. Ends
// by `deadline`, or with Cancelled when `cancel_fd` turns readable.
absl::StatusOr<std::unique_ptr<Stream>> StartTls(
    int fd, const std::string& host, const TlsSettings& tls,
    const std::string& endpoint, Deadline deadline, int cancel_fd);

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_TLS_H_
