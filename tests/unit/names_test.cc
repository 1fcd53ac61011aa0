// Copyright dlock authors. Unit tests of lock name and owner token validation
// (C15, C6), through the public API on memory://.
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "dlock/client.h"
#include "dlock/errors.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock {
namespace {

class Names : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        Connect("memory://names-test");
    ASSERT_OK(client);
    client_ = *std::move(client);
  }
  std::unique_ptr<LockClient> client_;
};

TEST_F(Names, AcceptsAnyValidUtf8UpTo512Bytes) {
  std::string wide;
  while (wide.size() + 4 <= 512) wide += "\xf0\x9f\x94\x92";  // U+1F512
  const std::vector<std::string> good = {
      "a",
      " ",
      std::string(512, 'x'),
      wide,  // 512 bytes of four-byte characters
      "锁/名字",
      "x'); DROP TABLE t; --",
      "{a}/../*?\"'`\\",
      "\xc2\xa0",          // U+00A0, a space but no control character
      "\xc2\xa1",          // U+00A1, just past the C1 controls
      "\xed\x9f\xbf",      // U+D7FF, just below the surrogates
      "\xee\x80\x80",      // U+E000, just above them
      "\xef\xbf\xbf",      // U+FFFF
      "\xf4\x8f\xbf\xbf",  // U+10FFFF, the last code point
      "~",                 // 0x7E, just below DEL
  };
  for (const std::string& name : good) {
    absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
        client_->GetLock(name);
    ASSERT_OK(lock) << "'" << name << "'";
    EXPECT_EQ((*lock)->name(), name);
    absl::StatusOr<Hold> hold = (*lock)->TryAcquire();
    ASSERT_OK(hold) << name;
    EXPECT_OK(hold->Release()) << name;
  }
}

TEST_F(Names, RejectsEmptyLongInvalidAndControlNames) {
  const std::vector<std::string> bad = {
      "",
      std::string(513, 'x'),
      std::string(510, 'x') + "锁",  // 513 bytes
      "\x80",                        // a lone continuation byte
      "\xff",
      "\xfe",
      "\xc0\x80",          // overlong NUL
      "\xc1\xbf",          // overlong
      "\xe0\x80\xaf",      // overlong '/'
      "\xf0\x80\x80\xaf",  // overlong '/'
      "\xe9\x94",          // cut short
      "\xe9\x94"
      "a",                 // cut short by an ASCII byte
      "\xed\xa0\x80",      // U+D800, a surrogate
      "\xed\xbf\xbf",      // U+DFFF, a surrogate
      "\xf4\x90\x80\x80",  // U+110000
      "\xf5\x80\x80\x80",
      std::string(1, '\0'),
      std::string("a\0b", 3),
      "\x01",
      "a\nb",
      "\r",
      "\t",
      "\x1f",
      "\x7f",      // DEL
      "\xc2\x80",  // U+0080, first C1 control
      "\xc2\x9f",  // U+009F, last C1 control
  };
  for (const std::string& name : bad) {
    absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
        client_->GetLock(name);
    EXPECT_EQ(lock.status().code(), absl::StatusCode::kInvalidArgument)
        << "a name of " << name.size() << " bytes";
  }
}

TEST_F(Names, MessagesSayWhatIsWrong) {
  EXPECT_NE(client_->GetLock("").status().message().find("empty"),
            absl::string_view::npos);
  EXPECT_NE(
      client_->GetLock(std::string(600, 'x')).status().message().find("512"),
      absl::string_view::npos);
  EXPECT_NE(client_->GetLock("\xff").status().message().find("UTF-8"),
            absl::string_view::npos);
  EXPECT_NE(client_->GetLock("a\nb").status().message().find("control"),
            absl::string_view::npos);
}

TEST_F(Names, OwnerTokensAreValidatedLikeNames) {
  absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
      client_->GetLock("owned");
  ASSERT_OK(lock);
  for (const std::string& token : std::vector<std::string>{
           "\xff", "job\n1", std::string("a\0b", 3), "\xed\xa0\x80"}) {
    AcquireOptions options;
    options.owner_token = token;
    EXPECT_EQ((*lock)->Acquire(options).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(client_->OwnerTokens().Release("owned", token).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(
        client_->OwnerTokens().Renew("owned", token, absl::Seconds(1)).code(),
        absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(client_->OwnerTokens().State("owned", token),
              LockState::kNotHeld);
  }
  // Release and renew by token need one: a thread's holds go through Holds.
  EXPECT_EQ(client_->OwnerTokens().Release("owned", "").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->OwnerTokens().Renew("owned", "").code(),
            absl::StatusCode::kInvalidArgument);
  AcquireOptions options;
  options.owner_token = "trace-锁-42";
  absl::StatusOr<Hold> hold = (*lock)->Acquire(options);
  ASSERT_OK(hold);
  EXPECT_EQ(client_->OwnerTokens().State("owned", options.owner_token),
            LockState::kHeld);
  EXPECT_OK(client_->OwnerTokens().Release("owned", options.owner_token));
  // Released by token: the Hold's acquisition is gone with it.
  EXPECT_EQ(client_->OwnerTokens().State("owned", options.owner_token),
            LockState::kNotHeld);
  EXPECT_EQ(hold->state(), LockState::kNotHeld);
  absl::Status again = hold->Release();
  EXPECT_TRUE(IsNotOwner(again)) << again;
}

// A child forked after Connect() inherits the client object: acting through
// it, it must not be its parent's owner (C6), or both would "hold" one lock.
TEST_F(Names, ForkedChildIsNotItsParentsOwner) {
  const std::string parent = client_->CurrentOwner();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Only what is safe in a child of a threaded process: no locks taken
    // by the client's threads, which the child does not have.
    const std::string child = client_->CurrentOwner();
    (void)!write(fds[1], child.data(), child.size());
    _exit(0);
  }
  close(fds[1]);
  std::string child;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) {
    child.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_FALSE(child.empty());
  EXPECT_NE(child, parent) << "the forked child acts as its parent's owner";
  EXPECT_EQ(client_->CurrentOwner(), parent);  // the parent's is unchanged
}

}  // namespace
}  // namespace dlock
