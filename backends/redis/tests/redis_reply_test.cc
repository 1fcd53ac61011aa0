// Copyright dlock authors. How the redis:// backend classifies error replies
// (backends/redis/redis_connection.h): which become which status, and which
// mean that the connection leads to a server that cannot serve this client
// and must be dropped.
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redis_connection.h"

namespace dlock::redis {
namespace {

using ::testing::HasSubstr;

// An error reply as hiredis hands it out, without a server.
struct ErrorReply {
  explicit ErrorReply(std::string text) : text(std::move(text)) {
    reply.type = REDIS_REPLY_ERROR;
    reply.str = this->text.data();
    reply.len = this->text.size();
  }
  std::string text;
  redisReply reply{};
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
  EXPECT_TRUE(ReplyError(&ok, "acquire", "h:1").ok());
  EXPECT_FALSE(MustReconnect(nullptr));
}

}  // namespace
}  // namespace dlock::redis
