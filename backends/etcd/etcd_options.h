// Copyright dlock authors. How an etcd client connects: its endpoints, its
// timeouts, TLS and authentication.
#ifndef DLOCK_BACKENDS_ETCD_ETCD_OPTIONS_H_
#define DLOCK_BACKENDS_ETCD_ETCD_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace dlock::etcd {

struct ClientOptions {
  // "host:port" of each member to talk to; calls go to one at a time and
  // move to the next when it fails.
  std::vector<std::string> endpoints;

  // A call's whole budget, across endpoints, when the caller sets no
  // deadline.
  absl::Duration call_timeout = absl::Seconds(5);
  // One try on one endpoint, for calls that may be tried again elsewhere (a
  // stalled member must not take the whole budget).
  absl::Duration attempt_timeout = absl::Seconds(2);
  // How long to wait for a connection to one endpoint before trying the
  // next.
  absl::Duration connect_timeout = absl::Seconds(1);
  // HTTP/2 pings on a connection with a stream open, so that a watch or a
  // lease keepalive on a member that stopped answering is moved elsewhere
  // after keepalive_time + keepalive_timeout. etcd refuses pings more often
  // than every 5 s (its --grpc-keepalive-min-time).
  absl::Duration keepalive_time = absl::Seconds(10);
  absl::Duration keepalive_timeout = absl::Seconds(5);

  // TLS: the same option names as rediss://. The server's certificate and
  // name are always verified.
  bool tls = false;
  std::string tls_ca;           // PEM file of the CAs to trust; empty: the
                                // system's
  std::string tls_cert;         // client certificate (PEM file), for
  std::string tls_key;          // servers started with --client-cert-auth
  std::string tls_server_name;  // the name the certificate must carry
                                // (and SNI); empty: each endpoint's host

  // etcd's user authentication: the client gets a token with these and
  // sends it with every call, and gets another when etcd forgets it. The
  // password never appears in an error.
  std::string user;
  std::string password;
};

}  // namespace dlock::etcd

#endif  // DLOCK_BACKENDS_ETCD_ETCD_OPTIONS_H_
