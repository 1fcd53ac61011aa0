// The four-letter-word client without a server: mntr's parsing, and a
// server that is not there.
#include "zk_four_letter.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

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
