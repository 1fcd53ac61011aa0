// libFuzzer target: the Redis reply path against a hostile or broken server.
// The input is every byte the server sends; the client reads it through the
// transport (a socket: the same Stream a TCP connection has) and hiredis's
// reader, twice:
//  - as a client being set up (AUTH with a password, SELECT, ROLE) and then
//    calling through the multiplexer, as every command connection does;
//  - as a plain reader, every reply handed to every parser of a reply
//    (the lock scripts', SCAN's, INFO's, the Sentinel's, the
//    subscription's, the error classification).
// Nothing may crash, hang or read out of bounds, and no message of the
// set-up or of a call may show the password the client sent for AUTH, even
// when the server repeats it (the target aborts if one does).
//
// Built with -DDLOCK_FUZZ=ON (clang: libFuzzer, ASan, UBSan) and run by
// scripts/fuzz.sh; in every other build the seed corpus in
// tests/fuzz/corpus/redis_reply is replayed as a test
// (redis_reply_fuzz_corpus).
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "redis_connection.h"
#include "redis_lock_ops.h"
#include "redis_mux.h"
#include "redis_sentinel.h"
#include "redis_subscriber.h"

namespace dlock::redis {
namespace {

constexpr char kPassword[] = "fuzz-secret-pw";
constexpr char kEndpoint[] = "fuzz:6379";
// Long enough never to expire here: the server's end is shut, so every read
// ends at once with the bytes or the end of the stream.
constexpr absl::Duration kTimeout = absl::Seconds(10);

void Check(const absl::Status& status) {
  if (absl::StrContains(status.message(), kPassword)) {
    std::cerr << "a message shows the password: " << status << "\n";
    std::abort();
  }
}
template <typename T>
void Check(const absl::StatusOr<T>& status) {
  Check(status.status());
}

// Every parser of a reply, on `r`. (Their messages quote the server's
// error replies, which the password is not sent with.)
void Parse(const redisReply* r) {
  (void)ReplyError(r, "fuzz", kEndpoint);
  (void)MustReconnect(r);
  (void)IsAclRefusal(r);
  (void)ParseAcquire(r, kEndpoint);
  (void)ParseRelease(r, "name", kEndpoint);
  (void)ParseRenew(r, "name", kEndpoint);
  (void)ParseInspect(r, "name", kEndpoint);
  (void)ParseForceUnlockIfToken(r, kEndpoint);
  (void)ParseRefreshLiveness(r, kEndpoint);
  (void)ParseUsedMemory(r, kEndpoint);
  std::string cursor;
  std::vector<std::string> names;
  (void)ParseScanPage(r, "dlock:{ns:", cursor, names, kEndpoint);
  (void)MasterAddressOf(r);
  (void)PublishedMessage(r);
}

// A connection whose server sends `data`, then closes its side.
std::unique_ptr<Connection> ServedBy(const uint8_t* data, size_t size,
                                     int& server_fd) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    std::abort();
  }
  // The fuzzer's inputs stay far below a socket's buffer (-max_len).
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = write(fds[1], data + sent, size - sent);
    if (n <= 0) std::abort();
    sent += static_cast<size_t>(n);
  }
  shutdown(fds[1], SHUT_WR);
  server_fd = fds[1];  // open: what the client writes lands here
  return std::make_unique<Connection>(PlainStream(fds[0], kEndpoint), kTimeout);
}

void AsAClient(const uint8_t* data, size_t size) {
  int server_fd = -1;
  std::unique_ptr<Connection> conn = ServedBy(data, size, server_fd);
  ConnectionConfig config;
  config.user = "fuzzer";
  config.password = kPassword;
  config.db = 3;
  config.must_be_master = true;
  config.endpoint = kEndpoint;
  const absl::Status set_up = conn->SetUp(config);
  Check(set_up);
  if (set_up.ok()) {
    MuxConnection mux(std::move(conn));
    for (int round = 0; round < 64; ++round) {
      absl::StatusOr<std::vector<Reply>> replies =
          mux.Call({FormatCommand({"EVALSHA", "0", "0"}),
                    FormatCommand({"PING"}), FormatCommand({"PING"})});
      Check(replies);
      if (!replies.ok()) break;
      for (const Reply& reply : *replies) Parse(reply.get());
    }
  }
  close(server_fd);
}

void AsAReader(const uint8_t* data, size_t size) {
  int server_fd = -1;
  std::unique_ptr<Connection> conn = ServedBy(data, size, server_fd);
  while (true) {
    std::vector<Reply> replies;
    if (!conn->ReadReplies(replies, DeadlineIn(kTimeout)).ok()) break;
    for (const Reply& reply : replies) Parse(reply.get());
  }
  conn.reset();
  close(server_fd);
}

}  // namespace
}  // namespace dlock::redis

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dlock::redis::AsAClient(data, size);
  dlock::redis::AsAReader(data, size);
  return 0;
}
