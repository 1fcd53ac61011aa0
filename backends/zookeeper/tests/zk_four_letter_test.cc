// The four-letter-word client against a scripted listener on loopback:
// mntr's parsing, a refused word, a silent server, no server.
#include "zk_four_letter.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_testing.h"

namespace dlock::zk {
namespace {

using ::testing::HasSubstr;

TEST(ZkFourLetter, MntrValueReadsItsKeyOnly) {
  const std::string mntr =
      "zk_version\t3.8.0-1\nzk_approximate_data_size\t 2048\n"
      "zk_approximate_data_size_x\t9\nzk_znode_count\t12\n";
  EXPECT_EQ(*MntrValue(mntr, "zk_approximate_data_size"), 2048);
  EXPECT_EQ(*MntrValue(mntr, "zk_znode_count"), 12);
  absl::StatusOr<int64_t> missing = MntrValue(mntr, "zk_version");
  EXPECT_FALSE(missing.ok());  // not a number
  EXPECT_THAT(MntrValue(mntr, "zk_nothing").status().message(),
              HasSubstr("did not report zk_nothing"));
}

// A listener on a free loopback port that answers one connection: reads
// the word, then writes `answer` and closes, or with `silent` says nothing
// until the test ends.
class OneShotServer {
 public:
  OneShotServer(std::string answer, bool silent) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 1);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, answer, silent] {
      int conn = accept(fd_, nullptr, nullptr);
      if (conn < 0) return;
      char word[4];
      if (read(conn, word, sizeof(word)) == 4) received_.assign(word, 4);
      if (!silent) {
        (void)!write(conn, answer.data(), answer.size());
      } else {
        char rest;
        (void)!read(conn, &rest, 1);  // until the client gives up
      }
      close(conn);
    });
  }
  ~OneShotServer() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  const std::string& received() const { return received_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::string received_;
  std::thread thread_;
};

TEST(ZkFourLetter, ReadsTheAnswerUntilTheServerCloses) {
  std::string mntr;
  {
    OneShotServer server("zk_version\t3.8\nzk_approximate_data_size\t77\n",
                         false);
    absl::StatusOr<std::string> got =
        FourLetterWord(server.address(), "mntr", absl::Seconds(5));
    ASSERT_OK(got);
    mntr = *got;
    EXPECT_EQ(server.received(), "mntr");
  }
  EXPECT_EQ(*MntrValue(mntr, "zk_approximate_data_size"), 77);
}

TEST(ZkFourLetter, ARefusedWordIsUnimplementedAndSaysWhatToAllow) {
  OneShotServer server(
      "mntr is not executed because it is not in the whitelist.\n", false);
  absl::StatusOr<std::string> got =
      FourLetterWord(server.address(), "mntr", absl::Seconds(5));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(got.status().message(), HasSubstr("4lw.commands.whitelist"));
}

TEST(ZkFourLetter, ASilentServerIsUnavailableAfterTheTimeout) {
  OneShotServer server("", true);
  absl::StatusOr<std::string> got =
      FourLetterWord(server.address(), "mntr", absl::Milliseconds(300));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(got.status().message(), HasSubstr("did not answer 'mntr'"));
}

TEST(ZkFourLetter, NoServerIsUnavailableAndABadAddressInvalid) {
  absl::StatusOr<std::string> none =
      FourLetterWord("127.0.0.1:1", "mntr", absl::Seconds(2));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(none.status().message(), HasSubstr("127.0.0.1:1"));
  EXPECT_EQ(FourLetterWord("nowhere", "mntr", absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dlock::zk
