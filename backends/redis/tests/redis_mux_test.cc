// Copyright dlock authors. The connection multiplexer (backends/redis/
// redis_mux.cc) has no I/O thread: callers take turns writing and reading
// for each other. These tests check that no caller is left asleep with its
// replies unread, whatever the interleaving: against a scripted RESP server
// on loopback, which decides exactly when each reply goes out, and against a
// real redis-server under load, plain and over TLS.
#include "redis_mux.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "proc_state.h"
#include "redis_connection.h"
#include "redis_server.h"
#include "redis_tls.h"
#include "status_testing.h"
#include "tls_certificates.h"

namespace dlock::redis {
namespace {

using ::dlock::test::AsleepInKernel;
using ::dlock::test::ThreadId;

// A RESP server on 127.0.0.1 that does nothing by itself: the test reads the
// commands it received and sends replies when it chooses.
class ScriptedServer {
 public:
  ScriptedServer() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (listen_fd_ < 0 ||
        bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
            0 ||
        listen(listen_fd_, 4) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) !=
            0) {
      ADD_FAILURE() << "cannot listen on loopback: " << std::strerror(errno);
      return;
    }
    port_ = ntohs(addr.sin_port);
  }
  ~ScriptedServer() {
    if (conn_fd_ >= 0) close(conn_fd_);
    if (listen_fd_ >= 0) close(listen_fd_);
  }

  int port() const { return port_; }

  // Accepts the client's connection (its handshake completed in the
  // backlog, so the client's connect() did not wait for this).
  bool Accept() {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) return false;
    conn_fd_ = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    return conn_fd_ >= 0;
  }

  // The next `n` commands the client sent, each as its arguments; fewer
  // when the connection ends or 10 s pass.
  std::vector<std::vector<std::string>> ReadCommands(size_t n) {
    std::vector<std::vector<std::string>> out;
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (out.size() < n) {
      std::optional<std::vector<std::string>> command = ParseOne();
      if (command.has_value()) {
        out.push_back(*std::move(command));
        continue;
      }
      const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      pollfd p{conn_fd_, POLLIN, 0};
      if (ms <= 0 || poll(&p, 1, static_cast<int>(ms)) != 1) break;
      char buf[4096];
      const ssize_t got = read(conn_fd_, buf, sizeof(buf));
      if (got <= 0) break;
      in_.append(buf, static_cast<size_t>(got));
    }
    return out;
  }

  void Send(const std::string& bytes) {
    ASSERT_EQ(write(conn_fd_, bytes.data(), bytes.size()),
              static_cast<ssize_t>(bytes.size()));
  }

  // Closes the client's connection: its reads and writes fail from now on.
  void Hangup() {
    if (conn_fd_ >= 0) close(conn_fd_);
    conn_fd_ = -1;
  }

 private:
  // One complete command from in_, consumed; nullopt when not all there.
  std::optional<std::vector<std::string>> ParseOne() {
    size_t pos = 0;
    auto line = [&](std::string& text) {
      const size_t end = in_.find("\r\n", pos);
      if (end == std::string::npos) return false;
      text = in_.substr(pos, end - pos);
      pos = end + 2;
      return true;
    };
    std::string header;
    int64_t count = 0;
    if (!line(header) || header.empty() || header[0] != '*' ||
        !absl::SimpleAtoi(header.substr(1), &count)) {
      return std::nullopt;
    }
    std::vector<std::string> argv;
    for (int64_t i = 0; i < count; ++i) {
      int64_t size = 0;
      if (!line(header) || header.empty() || header[0] != '$' ||
          !absl::SimpleAtoi(header.substr(1), &size) ||
          in_.size() < pos + static_cast<size_t>(size) + 2) {
        return std::nullopt;
      }
      argv.push_back(in_.substr(pos, static_cast<size_t>(size)));
      pos += static_cast<size_t>(size) + 2;
    }
    in_.erase(0, pos);
    return argv;
  }

  int listen_fd_ = -1;
  int conn_fd_ = -1;
  int port_ = 0;
  std::string in_;
};

ConnectionConfig ConfigFor(int port) {
  ConnectionConfig config;
  config.host = "127.0.0.1";
  config.port = port;
  config.endpoint = absl::StrCat("127.0.0.1:", port);
  // Longer than any test: a read that gives up on its own would hide a
  // caller that nobody wakes.
  config.command_timeout = absl::Seconds(60);
  return config;
}

std::unique_ptr<MuxConnection> OpenMux(int port) {
  absl::StatusOr<std::unique_ptr<Connection>> conn =
      Connection::Open(ConfigFor(port));
  EXPECT_OK(conn);
  if (!conn.ok()) return nullptr;
  return std::make_unique<MuxConnection>(*std::move(conn));
}

std::vector<std::string> Commands(const std::vector<std::string>& words) {
  std::vector<std::string> out;
  for (const std::string& w : words) out.push_back(FormatCommand({"ECHO", w}));
  return out;
}

std::string Text(const Reply& reply) {
  return reply == nullptr ? "<null>" : std::string(reply->str, reply->len);
}

// A caller runs one Call on its own thread and reports when it returns.
class Caller {
 public:
  Caller(MuxConnection& mux, std::vector<std::string> commands) {
    thread_ = std::thread([this, &mux, commands = std::move(commands)] {
      tid_.store(ThreadId());
      started_.Notify();
      result_ = mux.Call(commands);
      done_.Notify();
    });
    started_.WaitForNotification();
  }
  ~Caller() { thread_.join(); }

  pid_t tid() const { return tid_.load(); }
  bool Returned(absl::Duration within) {
    return done_.WaitForNotificationWithTimeout(within);
  }
  // Only after Returned() said true.
  const absl::StatusOr<std::vector<Reply>>& result() const { return result_; }

 private:
  std::atomic<pid_t> tid_{0};
  absl::Notification started_;
  absl::Notification done_;
  absl::StatusOr<std::vector<Reply>> result_;
  std::thread thread_;
};

// The watchdog's batched renewal is one Call with several commands. When the
// caller that was reading got its own reply and left, it had to hand
// reading over to the owner of the batch, which was asleep with nobody to
// wake it: its replies came in and sat unread until some other thread
// happened to send a command.
TEST(MuxConnection, BatchQueuedBehindAReaderIsHandedTheReading) {
  ScriptedServer server;
  auto mux = OpenMux(server.port());
  ASSERT_NE(mux, nullptr);
  ASSERT_TRUE(server.Accept());

  // A sends one command and reads, waiting for its reply.
  Caller a(*mux, Commands({"a"}));
  ASSERT_EQ(server.ReadCommands(1).size(), 1u);
  ASSERT_TRUE(AsleepInKernel(a.tid()));

  // The batch goes out behind it; its owner waits, since A is reading.
  Caller batch(*mux, Commands({"b1", "b2", "b3"}));
  ASSERT_EQ(server.ReadCommands(3).size(), 3u);
  ASSERT_TRUE(AsleepInKernel(batch.tid()));

  // A's reply alone: A returns and stops reading.
  server.Send("$1\r\na\r\n");
  ASSERT_TRUE(a.Returned(absl::Seconds(10)));
  ASSERT_OK(a.result());
  EXPECT_EQ(Text((*a.result())[0]), "a");

  // The batch's replies come later; its owner must be reading by then.
  server.Send("$2\r\nb1\r\n$2\r\nb2\r\n$2\r\nb3\r\n");
  const bool returned = batch.Returned(absl::Seconds(10));
  EXPECT_TRUE(returned)
      << "the batch's replies arrived but its caller is still asleep";
  if (!returned) {
    // Another caller reads them for it, so that the test can end.
    server.Send("$6\r\nrescue\r\n");
    ASSERT_OK(mux->Call(Commands({"rescue"})));
    ASSERT_TRUE(batch.Returned(absl::Seconds(10)));
  }
  ASSERT_OK(batch.result());
  ASSERT_EQ(batch.result()->size(), 3u);
  EXPECT_EQ(Text((*batch.result())[0]), "b1");
  EXPECT_EQ(Text((*batch.result())[2]), "b3");
}

// The same hand-off between two batches, with the reader's replies and the
// first of the next batch's arriving in one read.
TEST(MuxConnection, BatchHandsReadingToTheNextBatch) {
  ScriptedServer server;
  auto mux = OpenMux(server.port());
  ASSERT_NE(mux, nullptr);
  ASSERT_TRUE(server.Accept());

  Caller first(*mux, Commands({"x1", "x2"}));
  ASSERT_EQ(server.ReadCommands(2).size(), 2u);
  ASSERT_TRUE(AsleepInKernel(first.tid()));
  Caller second(*mux, Commands({"y1", "y2", "y3"}));
  ASSERT_EQ(server.ReadCommands(3).size(), 3u);
  ASSERT_TRUE(AsleepInKernel(second.tid()));

  server.Send("$2\r\nx1\r\n$2\r\nx2\r\n$2\r\ny1\r\n");
  ASSERT_TRUE(first.Returned(absl::Seconds(10)));
  ASSERT_OK(first.result());
  server.Send("$2\r\ny2\r\n$2\r\ny3\r\n");
  const bool returned = second.Returned(absl::Seconds(10));
  EXPECT_TRUE(returned) << "the second batch was left asleep";
  if (!returned) {
    server.Send("$6\r\nrescue\r\n");
    ASSERT_OK(mux->Call(Commands({"rescue"})));
    ASSERT_TRUE(second.Returned(absl::Seconds(10)));
  }
  ASSERT_OK(second.result());
  EXPECT_EQ(Text((*second.result())[2]), "y3");
}

// A Redlock attempt submits to every master before it awaits any, so the
// owner of the oldest pending request may be away, awaiting another server.
// The reading must go to a caller that sleeps here, or it sleeps for good.
TEST(MuxConnection, ReadingSkipsACallerThatSubmittedAndIsAway) {
  ScriptedServer server;
  auto mux = OpenMux(server.port());
  ASSERT_NE(mux, nullptr);
  ASSERT_TRUE(server.Accept());

  Caller reader(*mux, Commands({"r"}));
  ASSERT_EQ(server.ReadCommands(1).size(), 1u);
  ASSERT_TRUE(AsleepInKernel(reader.tid()));
  // This thread submits and goes away without awaiting.
  std::unique_ptr<MuxConnection::Ticket> away = mux->Submit(Commands({"a"}));
  ASSERT_EQ(server.ReadCommands(1).size(), 1u);
  Caller behind(*mux, Commands({"b"}));
  ASSERT_EQ(server.ReadCommands(1).size(), 1u);
  ASSERT_TRUE(AsleepInKernel(behind.tid()));

  server.Send("$1\r\nr\r\n");
  ASSERT_TRUE(reader.Returned(absl::Seconds(10)));
  server.Send("$1\r\na\r\n$1\r\nb\r\n");
  const bool returned = behind.Returned(absl::Seconds(10));
  EXPECT_TRUE(returned) << "the caller behind an absent one was left asleep";
  absl::StatusOr<std::vector<Reply>> mine = mux->Await(*away);
  ASSERT_OK(mine);
  EXPECT_EQ(Text((*mine)[0]), "a");
  ASSERT_TRUE(behind.Returned(absl::Seconds(10)));
  ASSERT_OK(behind.result());
  EXPECT_EQ(Text((*behind.result())[0]), "b");
}

// Submitting to two servers, then awaiting both, overlaps their waits.
TEST(MuxConnection, SubmitToTwoServersThenAwaitBoth) {
  ScriptedServer one;
  ScriptedServer two;
  auto mux_one = OpenMux(one.port());
  auto mux_two = OpenMux(two.port());
  ASSERT_NE(mux_one, nullptr);
  ASSERT_NE(mux_two, nullptr);
  ASSERT_TRUE(one.Accept());
  ASSERT_TRUE(two.Accept());
  std::unique_ptr<MuxConnection::Ticket> t1 = mux_one->Submit(Commands({"1"}));
  std::unique_ptr<MuxConnection::Ticket> t2 = mux_two->Submit(Commands({"2"}));
  // Both servers have the command before either answers.
  ASSERT_EQ(one.ReadCommands(1).size(), 1u);
  ASSERT_EQ(two.ReadCommands(1).size(), 1u);
  two.Send("$1\r\n2\r\n");
  one.Send("$1\r\n1\r\n");
  absl::StatusOr<std::vector<Reply>> r1 = mux_one->Await(*t1);
  absl::StatusOr<std::vector<Reply>> r2 = mux_two->Await(*t2);
  ASSERT_OK(r1);
  ASSERT_OK(r2);
  EXPECT_EQ(Text((*r1)[0]), "1");
  EXPECT_EQ(Text((*r2)[0]), "2");
}

// A connection that ends while a reader and a batch behind it wait fails
// both at once, with Unavailable naming the server.
TEST(MuxConnection, HangupFailsEveryWaitingCallerAtOnce) {
  ScriptedServer server;
  auto mux = OpenMux(server.port());
  ASSERT_NE(mux, nullptr);
  ASSERT_TRUE(server.Accept());

  Caller a(*mux, Commands({"a"}));
  ASSERT_EQ(server.ReadCommands(1).size(), 1u);
  ASSERT_TRUE(AsleepInKernel(a.tid()));
  Caller batch(*mux, Commands({"b1", "b2"}));
  ASSERT_EQ(server.ReadCommands(2).size(), 2u);
  ASSERT_TRUE(AsleepInKernel(batch.tid()));

  server.Hangup();
  ASSERT_TRUE(a.Returned(absl::Seconds(10)));
  ASSERT_TRUE(batch.Returned(absl::Seconds(10)));
  for (const absl::StatusOr<std::vector<Reply>>* result :
       {&a.result(), &batch.result()}) {
    ASSERT_FALSE(result->ok());
    EXPECT_EQ(result->status().code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(result->status().message().find(
                  absl::StrCat("127.0.0.1:", server.port())),
              std::string::npos)
        << result->status();
  }
  EXPECT_TRUE(mux->broken());
  EXPECT_EQ(mux->Call(Commands({"late"})).status().code(),
            absl::StatusCode::kUnavailable);
}

// A server that answers READONLY, MASTERDOWN or LOADING cannot serve this
// client on this connection: the connection takes no new calls (the backend
// dials again), while calls already sent get their replies.
TEST(MuxConnection, ServerThatCannotServeUsRetiresTheConnection) {
  ScriptedServer server;
  auto mux = OpenMux(server.port());
  ASSERT_NE(mux, nullptr);
  ASSERT_TRUE(server.Accept());

  Caller ordinary(*mux, Commands({"e"}));
  ASSERT_EQ(server.ReadCommands(1).size(), 1u);
  server.Send("-ERR something else\r\n");
  ASSERT_TRUE(ordinary.Returned(absl::Seconds(10)));
  EXPECT_FALSE(mux->broken()) << "an ordinary error keeps the connection";

  Caller a(*mux, Commands({"a"}));
  ASSERT_EQ(server.ReadCommands(1).size(), 1u);
  ASSERT_TRUE(AsleepInKernel(a.tid()));
  Caller batch(*mux, Commands({"b1", "b2"}));
  ASSERT_EQ(server.ReadCommands(2).size(), 2u);
  ASSERT_TRUE(AsleepInKernel(batch.tid()));
  server.Send(
      "-READONLY You can't write against a read only replica.\r\n"
      "$2\r\nb1\r\n");
  ASSERT_TRUE(a.Returned(absl::Seconds(10)));
  ASSERT_OK(a.result());
  EXPECT_EQ(Text((*a.result())[0]).substr(0, 8), "READONLY");
  EXPECT_TRUE(mux->broken());
  EXPECT_TRUE(mux->wrong_server());
  // The batch sent before still gets its replies.
  server.Send("$2\r\nb2\r\n");
  ASSERT_TRUE(batch.Returned(absl::Seconds(10)));
  ASSERT_OK(batch.result());
  EXPECT_EQ(Text((*batch.result())[1]), "b2");
}

// A write to a connection the server has closed and then reset raises
// SIGPIPE, which kills the process unless the write says not to: a library
// must never take its host process down because a server went away. A batch
// larger than the socket buffer takes several write()s; the first provokes
// the reset, the next would raise the signal.
TEST(MuxConnectionDeathTest, WritingToAClosedConnectionDoesNotKillTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ScriptedServer server;
        auto mux = OpenMux(server.port());
        if (mux == nullptr || !server.Accept()) _exit(2);
        server.Hangup();
        absl::SleepFor(absl::Milliseconds(100));  // its FIN is here
        const std::string big(8 << 20, 'x');
        absl::StatusOr<std::vector<Reply>> replies =
            mux->Call({FormatCommand({"ECHO", big})});
        _exit(!replies.ok() &&
                      replies.status().code() == absl::StatusCode::kUnavailable
                  ? 0
                  : 3);
      },
      ::testing::ExitedWithCode(0), "");
}

// Many threads, single commands and batches mixed, against a real server,
// plain and over TLS (where one thread's SSL_write and another's SSL_read
// share the connection, and the large replies span many TLS records): every
// call gets its own replies, in order, and nobody is left asleep when the
// others stop (each thread's last call is where a lost hand-off would
// strand it).
class MuxOnServer : public ::testing::TestWithParam<bool> {};

INSTANTIATE_TEST_SUITE_P(Transports, MuxOnServer, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Tls" : "Plain";
                         });

TEST_P(MuxOnServer, ManyThreadsMixingBatchesAllFinish) {
  absl::StatusOr<std::unique_ptr<test::RedisServer>> server =
      test::RedisServer::Start({.tls = GetParam()});
  ASSERT_OK(server);
  ConnectionConfig config = ConfigFor((*server)->port());
  if (GetParam()) {
    absl::StatusOr<const test::TlsCertificates*> certs =
        test::SharedTlsCertificates();
    ASSERT_OK(certs);
    absl::StatusOr<std::shared_ptr<const TlsContext>> context =
        TlsContext::Create({.ca_file = (*certs)->ca});
    ASSERT_OK(context);
    config.tls.context = *context;
  }
  absl::StatusOr<std::unique_ptr<Connection>> conn = Connection::Open(config);
  ASSERT_OK(conn);
  auto mux = std::make_unique<MuxConnection>(*std::move(conn));

  constexpr int kThreads = 8;
  constexpr int kRounds = 30;
  constexpr int kCallsPerRound = 40;
  std::atomic<int> wrong{0};
  std::atomic<int> failed{0};
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<int> finished{0};
    absl::Notification all_done;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kCallsPerRound; ++i) {
          // Sizes 1 to 4, different in each thread and call; one word in
          // 64 is 40 KB (several TLS records).
          const int size = 1 + (t + i) % 4;
          std::vector<std::string> words;
          for (int k = 0; k < size; ++k) {
            words.push_back(absl::StrCat(round, ".", t, ".", i, ".", k));
            if ((round + t + i + k) % 64 == 0)
              words.back().resize(40 << 10, 'w');
          }
          absl::StatusOr<std::vector<Reply>> replies =
              mux->Call(Commands(words));
          if (!replies.ok()) {
            ++failed;
            continue;
          }
          for (int k = 0; k < size; ++k) {
            if (Text((*replies)[k]) != words[k]) ++wrong;
          }
        }
        if (++finished == kThreads) all_done.Notify();
      });
    }
    const bool done =
        all_done.WaitForNotificationWithTimeout(absl::Seconds(60));
    EXPECT_TRUE(done) << "round " << round << ": " << finished.load() << " of "
                      << kThreads << " threads finished";
    while (!done && !all_done.HasBeenNotified()) {
      // Wake the stranded callers so that the test can end.
      (void)mux->Call(Commands({"rescue"}));
      absl::SleepFor(absl::Milliseconds(10));
    }
    for (std::thread& thread : threads) thread.join();
    if (!done) break;
  }
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(failed.load(), 0);
}

}  // namespace
}  // namespace dlock::redis
