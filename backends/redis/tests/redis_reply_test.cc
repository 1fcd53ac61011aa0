// Copyright dlock authors. How the redis:// backend classifies error replies
// (backends/redis/redis_connection.h): which become which status, and which
// mean that the connection leads to a server that cannot serve this client
// and must be dropped.
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redis_connection.h"
#include "redis_lock_ops.h"
#include "redis_scripts.h"
#include "status_testing.h"

namespace dlock::redis {
namespace {

using ::testing::HasSubstr;

// A reply of text (an error, a bulk string) as hiredis hands it out,
// without a server.
struct TextReply {
  TextReply(int type, std::string text) : text(std::move(text)) {
    reply.type = type;
    reply.str = this->text.data();
    reply.len = this->text.size();
  }
  std::string text;
  redisReply reply{};
};

struct ErrorReply : TextReply {
  explicit ErrorReply(std::string text)
      : TextReply(REDIS_REPLY_ERROR, std::move(text)) {}
};

TEST(RedisReplies, ServersThatCannotServeUsAreLeft) {
  // What Redis 7 sends: a write on a replica (also from inside a script), a
  // replica whose master is down, a server still loading its data set.
  for (const char* text :
       {"READONLY You can't write against a read only replica.",
        "READONLY You can't write against a read only replica. script: "
        "64c6f9e0, on @user_script:5.",
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is "
        "set to 'no'.",
        "LOADING Redis is loading the dataset in memory"}) {
    ErrorReply r(text);
    EXPECT_TRUE(MustReconnect(&r.reply)) << text;
    const absl::Status s = ReplyError(&r.reply, "acquire", "10.0.0.5:6379");
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << text;
    EXPECT_THAT(s.message(), HasSubstr("10.0.0.5:6379"));
    EXPECT_THAT(s.message(), HasSubstr(text));
  }
}

TEST(RedisReplies, OtherErrorsKeepTheConnection) {
  struct Case {
    const char* text;
    absl::StatusCode code;
  } cases[] = {
      // A script runs too long: the same server answers once it is done.
      {"BUSY Redis is busy running a script.", absl::StatusCode::kUnavailable},
      // A cluster slot moving, a cluster without a master for a slot:
      // transient, ridden out by a waiting acquire.
      {"TRYAGAIN Multiple keys request during rehashing of slot",
       absl::StatusCode::kUnavailable},
      {"CLUSTERDOWN The cluster is down", absl::StatusCode::kUnavailable},
      {"NOAUTH Authentication required.", absl::StatusCode::kUnauthenticated},
      {"WRONGPASS invalid username-password pair",
       absl::StatusCode::kUnauthenticated},
      // The ACL of the connection's user (Redis 7.0's texts), outside a
      // script and inside one.
      {"NOPERM this user has no permissions to run the 'evalsha' command",
       absl::StatusCode::kPermissionDenied},
      {"NOPERM this user has no permissions to access one of the keys used "
       "as arguments",
       absl::StatusCode::kPermissionDenied},
      {"ERR The user executing the script can't run this command or "
       "subcommand script: 61636018f4e6b5817b89791bbed242f93fa089e3, on "
       "@user_script:1.",
       absl::StatusCode::kPermissionDenied},
      {"ERR unknown command 'EVALSHA'", absl::StatusCode::kInternal},
      {"NOSCRIPT No matching script.", absl::StatusCode::kInternal},
      // Only the error code counts, not a word that starts like one.
      {"READONLYISH not a code Redis sends", absl::StatusCode::kInternal},
      {"ERR READONLY in the message", absl::StatusCode::kInternal},
  };
  for (const Case& c : cases) {
    ErrorReply r(c.text);
    EXPECT_FALSE(MustReconnect(&r.reply)) << c.text;
    EXPECT_EQ(ReplyError(&r.reply, "acquire", "h:1").code(), c.code) << c.text;
  }
  redisReply ok{};
  ok.type = REDIS_REPLY_INTEGER;
  EXPECT_FALSE(MustReconnect(&ok));
  EXPECT_OK(ReplyError(&ok, "acquire", "h:1"));
  EXPECT_FALSE(MustReconnect(nullptr));
}

// What `bytes` from a server make a connection read: its status.
absl::Status ReadingOf(const std::string& bytes) {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  EXPECT_EQ(write(fds[1], bytes.data(), bytes.size()),
            static_cast<ssize_t>(bytes.size()));
  shutdown(fds[1], SHUT_WR);
  Connection conn(PlainStream(fds[0], "h:1"), absl::Seconds(10));
  std::vector<Reply> replies;
  absl::Status read = conn.ReadReplies(replies, DeadlineIn(absl::Seconds(10)));
  close(fds[1]);
  return read;
}

// hiredis 0.14 believes the length a server gives an array: 600 million
// made it allocate 4.8 GB at once, and a negative length made an array
// that claims 2^64 - 2 elements and holds none, which the first look at
// an element dereferenced (both found by tests/fuzz/redis_reply_fuzz.cc).
TEST(RedisReplies, ArrayLengthsAreCheckedBeforeAnythingIsAllocated) {
  for (const char* bytes :
       {"*600000000\r\n:1\r\n", "*-2\r\n", "*2147483648\r\n:1\r\n"}) {
    const absl::Status read = ReadingOf(bytes);
    EXPECT_EQ(read.code(), absl::StatusCode::kInternal) << bytes << read;
    EXPECT_THAT(read.message(), HasSubstr("h:1")) << bytes;
  }
  EXPECT_OK(ReadingOf("*2\r\n:1\r\n:2\r\n"));
}

// A free lock taken answers with the value written (docs/redis.md, keys):
// the token is its seconds and microseconds, as the server's TIME gave
// them, and what comes before the owner is kept for the release.
TEST(RedisReplies, AFreshGrantIsReadFromTheValueWritten) {
  const std::string value = "v4 1795778248 19076 1 10000 1 10001 -1 0 me 2";
  TextReply fresh(REDIS_REPLY_STRING, value);
  absl::StatusOr<AcquireReply> parsed = ParseAcquire(&fresh.reply, "h:1");
  ASSERT_OK(parsed);
  ASSERT_TRUE(parsed->acquired.has_value());
  EXPECT_EQ(parsed->acquired->fencing_token, uint64_t{1795778248019076});
  EXPECT_EQ(parsed->acquired->hold_count, 1);
  EXPECT_EQ(parsed->fresh_prefix, "v4 1795778248 19076 1 10000 1 10001 -1 0 ");
  for (const char* bad :
       {"", "v4", "v4 1795778248", "v4 1795778248 1 1 10000 1 10001 -1 0",
        "v4 1795778248 1000000 1 1 1 1 -1 0 me",
        "v3 1795778248 19076 1 10000 1 10001 -1 0 me", "v4 -1 2 1 me",
        "v4 99999999999999 1 1 1 1 1 -1 0 me"}) {
    TextReply r(REDIS_REPLY_STRING, bad);
    const absl::StatusOr<AcquireReply> refused = ParseAcquire(&r.reply, "h:1");
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInternal) << bad;
    EXPECT_THAT(refused.status().message(), HasSubstr("h:1")) << bad;
  }
}

// A lock call is encoded straight onto the connection's bytes: the same
// command line as Command()'s, in each of the three ways scripts are sent,
// after whatever the buffer held.
TEST(RedisScripts, CallsAreEncodedAsTheirCommandLine) {
  Scripts scripts;
  const std::vector<std::string> keys = {"dlock:{ns:a}", "dlock:r{ns:a}"};
  const std::vector<std::string> args = {"owner", "", "10000", "with space"};
  for (Scripts::Mode mode : {Scripts::Mode::kEval, Scripts::Mode::kEvalSha,
                             Scripts::Mode::kFunction}) {
    scripts.mode = mode;
    scripts.release.sha =
        mode == Scripts::Mode::kEvalSha ? std::string(40, 'f') : "";
    std::string out = "*1\r\n$4\r\nPING\r\n";
    scripts.AppendCommand(out, scripts.release, keys, args);
    EXPECT_EQ(out, "*1\r\n$4\r\nPING\r\n" + FormatCommand(scripts.Command(
                                                scripts.release, keys, args)))
        << static_cast<int>(mode);
    // The room a caller reserves holds it, and ASKING before it.
    const std::string asking = FormatCommand({"ASKING"});
    EXPECT_GE(
        scripts.AppendedSizeBound(scripts.release, keys, args),
        out.size() - std::string("*1\r\n$4\r\nPING\r\n").size() + asking.size())
        << static_cast<int>(mode);
  }
}

}  // namespace
}  // namespace dlock::redis
