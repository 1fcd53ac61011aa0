#include "redis_tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace dlock::redis {
namespace {

// Every error OpenSSL queued on this thread, oldest first, and clears them.
std::string TakeOpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    absl::StrAppend(&out, out.empty() ? "" : "; ",
                    reason != nullptr ? reason : "unknown error");
  }
  return out.empty() ? "unknown error" : out;
}

// The socket BIO of OpenSSL writes with write(2), which raises SIGPIPE on a
// connection the server reset, and the default action of SIGPIPE kills the
// host process. This one sends with MSG_NOSIGNAL.
int FdOf(BIO* bio) {
  return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
}

int BioWrite(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  while (true) {
    const ssize_t n = send(FdOf(bio), data, static_cast<size_t>(size),
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(bio);
    return -1;
  }
}

int BioRead(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  while (true) {
    const ssize_t n =
        recv(FdOf(bio), data, static_cast<size_t>(size), MSG_DONTWAIT);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(bio);
    return -1;
  }
}

long BioCtrl(BIO*, int cmd, long, void*) {  // NOLINT(runtime/int)
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

const BIO_METHOD* SocketBio() {
  static const BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK,
                                 "dlock redis socket");
    BIO_meth_set_write(m, BioWrite);
    BIO_meth_set_read(m, BioRead);
    BIO_meth_set_ctrl(m, BioCtrl);
    return m;
  }();
  return method;
}

int NoPassphrase(char*, int, int, void*) { return 0; }

bool IsIpAddress(const std::string& name) {
  in6_addr address;
  return inet_pton(AF_INET, name.c_str(), &address) == 1 ||
         inet_pton(AF_INET6, name.c_str(), &address) == 1;
}

// A failed TLS call: the result of SSL_get_error() and what it left.
struct Failure {
  int ssl_error = SSL_ERROR_NONE;
  unsigned long first = 0;  // NOLINT(runtime/int): ERR_peek_error()
  std::string reasons;
  int sys_errno = 0;
};

Failure Capture(SSL* ssl, int result) {
  Failure f;
  f.sys_errno = errno;
  f.ssl_error = SSL_get_error(ssl, result);
  f.first = ERR_peek_error();
  if (f.ssl_error == SSL_ERROR_SSL || f.ssl_error == SSL_ERROR_SYSCALL) {
    f.reasons = f.first != 0 ? TakeOpenSslErrors()
                             : (f.sys_errno != 0 ? std::strerror(f.sys_errno)
                                                 : "the server closed it");
  }
  ERR_clear_error();
  return f;
}

// An alert by which the server refused this client's certificate (or its
// lack of one).
bool RefusedOurCertificate(unsigned long error) {  // NOLINT(runtime/int)
  if (ERR_GET_LIB(error) != ERR_LIB_SSL) return false;
  switch (ERR_GET_REASON(error)) {
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
      return true;
    default:
      return false;
  }
}

// What a plaintext server (or not Redis at all) makes a TLS client see.
bool LooksLikePlaintext(unsigned long error) {  // NOLINT(runtime/int)
  if (ERR_GET_LIB(error) != ERR_LIB_SSL) return false;
  switch (ERR_GET_REASON(error)) {
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_UNKNOWN_PROTOCOL:
    case SSL_R_UNEXPECTED_EOF_WHILE_READING:
      return true;
    default:
      return false;
  }
}

// The status of a TLS call that failed after the handshake, or during it
// (`handshake`) for a reason other than the server's certificate.
absl::Status TlsError(const Failure& f, const std::string& endpoint,
                      bool handshake, bool has_client_certificate) {
  if (RefusedOurCertificate(f.first)) {
    return absl::UnauthenticatedError(absl::StrCat(
        "redis at ", endpoint, " refused this client's TLS certificate (",
        f.reasons, "): ",
        has_client_certificate ? "it does not accept the one in tls_cert"
                               : "it asks for one; give tls_cert and tls_key"));
  }
  if (f.ssl_error == SSL_ERROR_ZERO_RETURN ||
      (!handshake && ERR_GET_LIB(f.first) == ERR_LIB_SSL &&
       ERR_GET_REASON(f.first) == SSL_R_UNEXPECTED_EOF_WHILE_READING)) {
    return absl::UnavailableError(
        absl::StrCat("lost the connection to redis at ", endpoint,
                     ": the server closed it"));
  }
  if (!handshake) {
    return absl::UnavailableError(absl::StrCat(
        "lost the connection to redis at ", endpoint, ": ", f.reasons));
  }
  return absl::UnavailableError(absl::StrCat(
      "the TLS handshake with redis at ", endpoint, " failed: ", f.reasons,
      LooksLikePlaintext(f.first)
          ? " (does this port take TLS? a plaintext port wants redis://)"
          : ""));
}

// The server's certificate, refused.
absl::Status UntrustedCertificate(SSL* ssl, const TlsContext& context,
                                  const std::string& endpoint,
                                  const std::string& name) {
  const long result = SSL_get_verify_result(ssl);  // NOLINT(runtime/int)
  std::string hint;
  switch (result) {
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      hint = absl::StrCat("it does not name ", name,
                          "; tls_server_name sets the name to check");
      break;
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
      hint = "the server needs a certificate valid now";
      break;
    default:
      hint = context.uses_system_cas()
                 ? "no CA of the system's store signed it; tls_ca names a "
                   "CA file to trust instead"
                 : "no CA of tls_ca signed it";
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "the TLS certificate of redis at ", endpoint, " fails verification (",
      X509_verify_cert_error_string(result), "): ", hint));
}

class Tls : public Stream {
 public:
  Tls(int fd, std::string endpoint, SSL* ssl, bool has_client_certificate)
      : Stream(fd, std::move(endpoint)),
        ssl_(ssl),
        has_client_certificate_(has_client_certificate) {}
  ~Tls() override { SSL_free(ssl_); }

  // The server asked for a client certificate during the handshake
  // (OpenSSL's client_cert_cb, called when the context has none to give).
  void NoteCertificateRequest() { asked_for_certificate_.store(true); }

  absl::Status Write(absl::string_view bytes, Deadline deadline) override {
    while (!bytes.empty()) {
      const int size =
          static_cast<int>(std::min<size_t>(bytes.size(), INT_MAX));
      int n = 0;
      Failure f;
      {
        // OpenSSL's SSL object takes one call at a time; a reader on
        // another thread calls it between its waits, never during one.
        absl::MutexLock lock(&mu_);
        ERR_clear_error();
        n = SSL_write(ssl_, bytes.data(), size);
        if (n <= 0) f = Capture(ssl_, n);
      }
      if (n > 0) {
        bytes.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      // SSL_ERROR_WANT_READ is not waited for: it only comes with a
      // renegotiation, which the context refuses (the reader could take
      // the bytes the writer waits for).
      if (f.ssl_error != SSL_ERROR_WANT_WRITE) return Failed(f);
      if (absl::StatusOr<bool> ready = Await(POLLOUT, deadline, -1);
          !ready.ok()) {
        return ready.status();
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> Read(char* buf, size_t size, Deadline deadline,
                              int wake_fd) override {
    const int most = static_cast<int>(std::min<size_t>(size, INT_MAX));
    // poll() first unless OpenSSL holds bytes already: a reader usually
    // waits for a reply not yet sent, and an SSL_read() before the wait
    // would cost a recv() that finds nothing.
    short events = 0;
    {
      absl::MutexLock lock(&mu_);
      if (SSL_has_pending(ssl_) == 0) events = POLLIN;
    }
    while (true) {
      if (events != 0) {
        absl::StatusOr<bool> ready = Await(events, deadline, wake_fd);
        if (!ready.ok()) return ready.status();
        if (!*ready) return 0;
      }
      int n = 0;
      Failure f;
      {
        absl::MutexLock lock(&mu_);
        ERR_clear_error();
        n = SSL_read(ssl_, buf, most);
        if (n <= 0) f = Capture(ssl_, n);
      }
      if (n > 0) {
        read_any_.store(true);
        return static_cast<size_t>(n);
      }
      // A record arrives in pieces: SSL_read() keeps what came and asks
      // for more. It may also have to send (a key update's answer).
      events = 0;
      if (f.ssl_error == SSL_ERROR_WANT_READ) events = POLLIN;
      if (f.ssl_error == SSL_ERROR_WANT_WRITE) events = POLLOUT;
      if (events == 0) return Failed(f);
    }
  }

  bool tls() const override { return true; }

 private:
  // The status of a read or write that failed. In TLS 1.3 the server checks
  // the client's certificate after the client's handshake is done: one that
  // requires a certificate and got none sends an alert and closes, and the
  // client's first command, which the server never read, makes its kernel
  // reset the connection, which may discard the alert. A server that asked
  // for a certificate and ended the connection before its first byte
  // refused this client for the lack of one.
  absl::Status Failed(const Failure& f) {
    if (!has_client_certificate_ && asked_for_certificate_.load() &&
        !read_any_.load() && !RefusedOurCertificate(f.first)) {
      return absl::UnauthenticatedError(absl::StrCat(
          "redis at ", endpoint(),
          " refused this client's TLS certificate (it asked for one, then "
          "ended the connection: ",
          f.ssl_error == SSL_ERROR_ZERO_RETURN ? "closed" : f.reasons,
          "): give tls_cert and tls_key"));
    }
    return TlsError(f, endpoint(), false, has_client_certificate_);
  }

  absl::Mutex mu_;
  SSL* const ssl_ ABSL_PT_GUARDED_BY(mu_);
  const bool has_client_certificate_;
  std::atomic<bool> asked_for_certificate_{false};
  std::atomic<bool> read_any_{false};
};

// OpenSSL's client_cert_cb: the server asked for a certificate and the
// context has none. Gives none (0), noting the request for the messages.
int NoteCertificateRequest(SSL* ssl, X509**, EVP_PKEY**) {
  if (auto* stream = static_cast<Tls*>(SSL_get_app_data(ssl))) {
    stream->NoteCertificateRequest();
  }
  return 0;
}

}  // namespace

TlsContext::TlsContext(SSL_CTX* ctx, const TlsOptions& options)
    : ctx_(ctx),
      verifies_(!options.insecure_skip_verify),
      has_client_certificate_(!options.cert_file.empty()),
      uses_system_cas_(options.ca_file.empty()) {}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

absl::StatusOr<std::shared_ptr<const TlsContext>> TlsContext::Create(
    const TlsOptions& options) {
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "tls_cert and tls_key go together: give both, or neither");
  }
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot set up TLS: ", TakeOpenSslErrors()));
  }
  // Owned from here: freed on every early return.
  std::shared_ptr<const TlsContext> context(new TlsContext(ctx, options));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // The multiplexer writes on one thread while another reads; a
  // renegotiation would make a write read. Redis never renegotiates.
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_mode(
      ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_default_passwd_cb(ctx, NoPassphrase);
  if (options.cert_file.empty()) {
    SSL_CTX_set_client_cert_cb(ctx, NoteCertificateRequest);
  }
  SSL_CTX_set_verify(
      ctx, options.insecure_skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER,
      nullptr);
  auto bad = [](absl::string_view option, const std::string& file,
                absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(option, ": cannot use '",
                                                   file, "' as ", what, ": ",
                                                   TakeOpenSslErrors()));
  };
  if (!options.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, options.ca_file.c_str(), nullptr) !=
        1) {
      return bad("tls_ca", options.ca_file, "a PEM file of CA certificates");
    }
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    return absl::InternalError(absl::StrCat(
        "cannot load the system's CA certificates: ", TakeOpenSslErrors()));
  }
  if (!options.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, options.cert_file.c_str()) !=
        1) {
      return bad("tls_cert", options.cert_file, "a PEM certificate");
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, options.key_file.c_str(),
                                    SSL_FILETYPE_PEM) != 1) {
      return bad("tls_key", options.key_file, "an unencrypted PEM private key");
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      return bad("tls_key", options.key_file,
                 "the private key of the certificate in tls_cert");
    }
  }
  return context;
}

absl::StatusOr<std::unique_ptr<Stream>> StartTls(
    int fd, const std::string& host, const TlsSettings& tls,
    const std::string& endpoint, Deadline deadline, int cancel_fd) {
  const TlsContext& context = *tls.context;
  ERR_clear_error();
  SSL* ssl = SSL_new(context.ssl_ctx());
  BIO* bio = ssl != nullptr ? BIO_new(SocketBio()) : nullptr;
  if (bio == nullptr) {
    SSL_free(ssl);
    close(fd);
    return absl::InternalError(absl::StrCat(
        "cannot set up TLS to redis at ", endpoint, ": ", TakeOpenSslErrors()));
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl, bio, bio);
  // The stream owns the socket and the SSL object from here.
  auto stream = std::make_unique<Tls>(fd, endpoint, ssl,
                                      context.has_client_certificate());
  SSL_set_app_data(ssl, stream.get());
  const std::string& name = tls.server_name.empty() ? host : tls.server_name;
  if (IsIpAddress(name)) {
    // No SNI for an address (RFC 6066); its certificate must carry it.
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, name.c_str());
    SSL_set1_host(ssl, name.c_str());
  }
  SSL_set_connect_state(ssl);
  while (true) {
    ERR_clear_error();
    const int result = SSL_connect(ssl);
    if (result == 1) return stream;
    const Failure f = Capture(ssl, result);
    short events = 0;
    if (f.ssl_error == SSL_ERROR_WANT_READ) events = POLLIN;
    if (f.ssl_error == SSL_ERROR_WANT_WRITE) events = POLLOUT;
    if (events == 0) {
      if (context.verifies() && SSL_get_verify_result(ssl) != X509_V_OK) {
        return UntrustedCertificate(ssl, context, endpoint, name);
      }
      return TlsError(f, endpoint, true, context.has_client_certificate());
    }
    switch (WaitFor(fd, events, deadline, cancel_fd)) {
      case Ready::kWoken:
        return absl::CancelledError(
            absl::StrCat("stopped connecting to redis at ", endpoint));
      case Ready::kTimedOut:
        return absl::UnavailableError(absl::StrCat(
            "the TLS handshake with redis at ", endpoint,
            " did not finish within connect_timeout (does this port take "
            "TLS? a plaintext port wants redis://)"));
      case Ready::kReady:
        break;
    }
  }
}

}  // namespace dlock::redis
