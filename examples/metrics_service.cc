// A service that exports its lock metrics to Prometheus. Run it with
//   DLOCK_BACKEND=memory:// metrics_service [--host 127.0.0.1] [--port 9464]
//       [--locks 20]
// (any backend URI, or DLOCK_PROFILE with DLOCK_CONFIG, as report_service),
// then scrape http://127.0.0.1:9464/metrics. --port 0 picks a free port;
// the first line on stdout says which. SIGINT or SIGTERM stops it.
//
// It takes --locks locks one after another, has a second owner try one of
// them while it is held (a failed attempt, as a busy lock gives), keeps one
// held, and serves the metrics until stopped.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/adapters/config.h"
#include "dlock/adapters/metrics.h"
#include "dlock/adapters/metrics_http.h"

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "metrics_service: %s\n",
               std::string(status.message()).c_str());
  return 1;
}

absl::Status TakeLocks(dlock::LockClient& client, int count) {
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<std::unique_ptr<dlock::DistributedLock>> lock =
        client.GetLock(absl::StrCat("report/", i));
    if (!lock.ok()) return lock.status();
    absl::StatusOr<dlock::Hold> hold = (*lock)->Acquire({});
    if (!hold.ok()) return hold.status();
    if (i == 0) {
      // Another owner finds it held: counted as an acquire failure.
      absl::StatusOr<dlock::Hold> other =
          (*lock)->TryAcquire({.owner_token = "another-worker"});
      if (other.ok()) return absl::InternalError("two owners held one lock");
    }
    if (absl::Status s = hold->Release(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 9464;
  int locks = 20;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--host") == 0 && has_value) {
      host = argv[++i];
    } else if (std::strcmp(argv[i], "--port") == 0 && has_value &&
               absl::SimpleAtoi(argv[i + 1], &port)) {
      ++i;
    } else if (std::strcmp(argv[i], "--locks") == 0 && has_value &&
               absl::SimpleAtoi(argv[i + 1], &locks) && locks >= 0) {
      ++i;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--host HOST] [--port PORT] [--locks N]\n",
                   argv[0]);
      return 2;
    }
  }
  // Blocked before any thread starts, so that every thread inherits the
  // mask and sigwait() below is the one place they arrive.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // One registry for every client of the process.
  auto metrics = std::make_shared<dlock::PrometheusMetrics>();
  dlock::ClientOptions options;
  options.observer = metrics;
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
      dlock::ConnectFromEnv(options);
  if (!client.ok()) return Fail(client.status());

  if (absl::Status s = TakeLocks(**client, locks); !s.ok()) return Fail(s);
  // One lock stays held while the metrics are served: dlock_holds_held 1.
  absl::StatusOr<std::unique_ptr<dlock::DistributedLock>> leader =
      (*client)->GetLock("leader");
  if (!leader.ok()) return Fail(leader.status());
  absl::StatusOr<dlock::Hold> leadership = (*leader)->Acquire({});
  if (!leadership.ok()) return Fail(leadership.status());

  absl::StatusOr<std::unique_ptr<dlock::MetricsHttpServer>> server =
      dlock::MetricsHttpServer::Start(
          host, port, [metrics] { return metrics->RenderText(); });
  if (!server.ok()) return Fail(server.status());
  std::printf("serving metrics on http://%s:%d/metrics\n", host.c_str(),
              (*server)->port());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  (*server)->Stop();
  return 0;
}
