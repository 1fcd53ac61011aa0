// What `dlock top` and `dlock monitor` decide, without a terminal or a
// backend: the table, its order, what fits, the held-too-long reports, dead
// holders and the metrics text.
#include "lock_table.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "monitor_state.h"
#include "status_testing.h"

namespace dlock::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

LockInfo Held(std::string name, uint64_t token, absl::Duration held_for,
              absl::Duration lease_left, std::optional<bool> live = {}) {
  LockInfo info;
  info.name = std::move(name);
  info.locked = true;
  info.owner = absl::StrCat("owner-of-", info.name);
  info.hold_count = 1;
  info.fencing_token = token;
  info.remaining_lease = lease_left;
  info.since = kNow - held_for;
  info.holder_live = live;
  return info;
}

std::vector<std::string> Names(const std::vector<LockInfo>& locks) {
  std::vector<std::string> names;
  for (const LockInfo& l : locks) names.push_back(l.name);
  return names;
}

std::vector<LockInfo> Sample() {
  return {Held("b", 7, absl::Seconds(5), absl::Seconds(20)),
          Held("a", 9, absl::Seconds(50), absl::Seconds(3)),
          Held("c", 3, absl::Seconds(1), absl::Seconds(9))};
}

TEST(LockTable, SortsByEachKeyAndReverses) {
  std::vector<LockInfo> locks = Sample();
  SortLocks(locks, {SortKey::kName, false}, kNow);
  EXPECT_THAT(Names(locks), ElementsAre("a", "b", "c"));
  SortLocks(locks, {SortKey::kHeldFor, false}, kNow);
  EXPECT_THAT(Names(locks), ElementsAre("a", "b", "c"));  // longest first
  SortLocks(locks, {SortKey::kLeaseLeft, false}, kNow);
  EXPECT_THAT(Names(locks), ElementsAre("a", "c", "b"));  // soonest first
  SortLocks(locks, {SortKey::kToken, false}, kNow);
  EXPECT_THAT(Names(locks), ElementsAre("a", "b", "c"));  // newest first
  SortLocks(locks, {SortKey::kToken, true}, kNow);
  EXPECT_THAT(Names(locks), ElementsAre("c", "b", "a"));
  SortLocks(locks, {SortKey::kName, true}, kNow);
  EXPECT_THAT(Names(locks), ElementsAre("c", "b", "a"));
}

TEST(LockTable, UnknownHoldTimesSortLast) {
  std::vector<LockInfo> locks = Sample();
  locks[1].since = absl::InfinitePast();  // "a"
  SortLocks(locks, {SortKey::kHeldFor, false}, kNow);
  EXPECT_THAT(Names(locks), ElementsAre("b", "c", "a"));
}

TEST(LockTable, KeysPickAndReverseTheOrder) {
  SortOrder order;
  EXPECT_EQ(ApplySortKey(order, 'n')->key, SortKey::kName);
  EXPECT_EQ(ApplySortKey(order, 'l')->key, SortKey::kLeaseLeft);
  EXPECT_EQ(ApplySortKey(order, 't')->key, SortKey::kToken);
  SortOrder reversed = *ApplySortKey(order, 'r');
  EXPECT_TRUE(reversed.reversed);
  EXPECT_EQ(reversed.key, order.key);
  // The direction stays when the key changes.
  EXPECT_TRUE(ApplySortKey(reversed, 'n')->reversed);
  EXPECT_FALSE(ApplySortKey(*ApplySortKey(reversed, 'r'), 'h')->reversed);
  EXPECT_FALSE(ApplySortKey(order, 'x').has_value());
  EXPECT_EQ(SortOrderName(reversed), "held-for (reversed)");
}

TEST(LockTable, ShortDurations) {
  EXPECT_EQ(ShortDuration(absl::Milliseconds(1500)), "1.5s");
  EXPECT_EQ(ShortDuration(absl::Seconds(123)), "2m03s");
  EXPECT_EQ(ShortDuration(absl::Minutes(62)), "1h02m");
  EXPECT_EQ(ShortDuration(absl::Hours(76)), "3d04h");
  EXPECT_EQ(ShortDuration(-absl::Seconds(3)), "0.0s");
}

TopScreen SampleScreen() {
  TopScreen screen;
  screen.endpoint = "redis://cache:6379";
  screen.lock_namespace = "jobs";
  screen.interval = absl::Seconds(1);
  screen.now = kNow;
  screen.locks = Sample();
  SortLocks(screen.locks, screen.order, kNow);
  return screen;
}

TEST(LockTable, RendersTitleStatusHeaderAndRows) {
  TopScreen screen = SampleScreen();
  screen.locks[0].holder_live = true;
  screen.locks[1].holder_live = false;
  std::vector<std::string> lines = RenderTopScreen(screen, 120, 30);
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0], "dlock top - redis://cache:6379 namespace jobs");
  EXPECT_TRUE(absl::StartsWith(lines[1], "3 locks - sort held-for - every 1s"))
      << lines[1];
  EXPECT_THAT(lines[2], HasSubstr("updated "));
  std::vector<std::string> header =
      absl::StrSplit(lines[3], ' ', absl::SkipEmpty());
  EXPECT_THAT(header, ElementsAre("LOCK", "HOLDER", "TOKEN", "HELD-FOR",
                                  "LEASE-LEFT", "LIVE", "WAITERS"));
  std::vector<std::string> row =
      absl::StrSplit(lines[4], ' ', absl::SkipEmpty());
  EXPECT_THAT(row,
              ElementsAre("a", "owner-of-a", "9", "50.0s", "3.0s", "yes", "-"));
  EXPECT_THAT(absl::StrSplit(lines[5], ' ', absl::SkipEmpty()),
              ElementsAre("b", "owner-of-b", "7", "5.0s", "20.0s", "no", "-"));
  // Liveness the backend cannot tell is "?", never a guess.
  EXPECT_THAT(absl::StrSplit(lines[6], ' ', absl::SkipEmpty()),
              ElementsAre("c", "owner-of-c", "3", "1.0s", "9.0s", "?", "-"));
  for (const std::string& line : lines) EXPECT_LE(line.size(), 120u);
}

TEST(LockTable, ErrorsShowOnTheStatusLine) {
  TopScreen screen = SampleScreen();
  screen.status = "error at 10:00:00: connection refused";
  std::vector<std::string> lines = RenderTopScreen(screen, 100, 30);
  EXPECT_EQ(lines[2], "error at 10:00:00: connection refused");
  EXPECT_EQ(lines.size(), 7u);  // the last listing stays
}

TEST(LockTable, CutsToTheTerminal) {
  TopScreen screen = SampleScreen();
  std::vector<std::string> narrow = RenderTopScreen(screen, 40, 30);
  for (const std::string& line : narrow) EXPECT_LE(line.size(), 40u) << line;
  std::vector<std::string> cut_title = RenderTopScreen(screen, 7, 30);
  EXPECT_EQ(cut_title[0], "dlock t");
  // At 120 columns LOCK is 29 wide: a longer name is cut to 28 bytes and
  // marked, here inside the 2-byte 'é' at bytes 27-28, so the cut backs up
  // to before it rather than leave half a character.
  screen.locks[0].name = std::string(27, 'x') + "\xc3\xa9yy";
  std::vector<std::string> wide = RenderTopScreen(screen, 120, 30);
  EXPECT_TRUE(absl::StartsWith(wide[4], std::string(27, 'x') + "~ "))
      << wide[4];
  // The columns stay aligned after a cut.
  EXPECT_EQ(wide[4].find("owner-of-"), wide[3].find("HOLDER"));

  // One row of three fits in 6 lines with the "more" line.
  std::vector<std::string> short_screen = RenderTopScreen(screen, 120, 6);
  ASSERT_EQ(short_screen.size(), 6u);
  EXPECT_EQ(short_screen[5], "... 2 more (make the terminal taller)");
  EXPECT_TRUE(RenderTopScreen(screen, 0, 0).empty());
}

TEST(LockTable, SaysPlainlyWhenTheBackendCannotList) {
  absl::Status s = CheckCanList(BackendTraits{.can_list = false},
                                "etcd://x:2379", "dlock top");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("etcd://x:2379 cannot list its locks"));
  EXPECT_THAT(s.message(), HasSubstr("dlock top"));
  EXPECT_OK(CheckCanList(BackendTraits{.can_list = true}, "x", "y"));
}

TEST(MonitorState, ReportsAHoldOnceWhenItCrossesAndOnceWhenItEnds) {
  HeldTooLongTracker tracker(absl::Seconds(10));
  LockInfo job = Held("job", 4, absl::Seconds(5), absl::Seconds(30));
  EXPECT_TRUE(tracker.Update({job}, kNow).empty());

  // Crosses: one event.
  std::vector<HeldTooLongEvent> events =
      tracker.Update({job}, kNow + absl::Seconds(6));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, HeldTooLongEvent::kCrossed);
  EXPECT_EQ(events[0].lock.name, "job");
  EXPECT_EQ(events[0].held_for, absl::Seconds(11));
  EXPECT_EQ(tracker.over_threshold(), 1u);
  // Still over: nothing more.
  EXPECT_TRUE(tracker.Update({job}, kNow + absl::Seconds(60)).empty());
  // Released: one event.
  events = tracker.Update({}, kNow + absl::Seconds(61));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, HeldTooLongEvent::kReleased);
  EXPECT_EQ(events[0].held_for, absl::Seconds(65));
  EXPECT_EQ(tracker.over_threshold(), 0u);
}

TEST(MonitorState, ANewHolderEndsTheReportAndMayCrossAgain) {
  HeldTooLongTracker tracker(absl::Seconds(10));
  LockInfo first = Held("job", 4, absl::Seconds(20), absl::Seconds(30));
  ASSERT_EQ(tracker.Update({first}, kNow).size(), 1u);
  // Taken over by a holder already over the threshold (a long scan gap).
  LockInfo second = Held("job", 5, absl::Seconds(12), absl::Seconds(30));
  second.owner = "next";
  std::vector<HeldTooLongEvent> events = tracker.Update({second}, kNow);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, HeldTooLongEvent::kHolderChanged);
  EXPECT_EQ(events[0].lock.fencing_token, 4u);
  EXPECT_EQ(events[0].new_owner, "next");
  EXPECT_EQ(events[0].new_fencing_token, 5u);
  EXPECT_EQ(events[1].kind, HeldTooLongEvent::kCrossed);
  EXPECT_EQ(events[1].lock.fencing_token, 5u);
  std::string line = FormatEvent(events[0], absl::Seconds(10), kNow);
  EXPECT_THAT(line, HasSubstr("held-too-long-ended reason=holder-changed "
                              "name=\"job\" owner=\"owner-of-job\" "
                              "fencing_token=4 held_for=20.0s threshold=10s "
                              "new_owner=\"next\" new_fencing_token=5"));
  EXPECT_TRUE(absl::StartsWith(line, "2027-01-15T08:00:00Z ")) << line;
}

TEST(MonitorState, HoldsWithoutAStartAreNeverReported) {
  HeldTooLongTracker tracker(absl::Seconds(1));
  LockInfo unknown = Held("x", 1, absl::Hours(1), absl::Seconds(30));
  unknown.since = absl::InfinitePast();
  EXPECT_TRUE(tracker.Update({unknown}, kNow).empty());
}

TEST(MonitorState, OnlyHoldersKnownDeadAreSelected) {
  std::vector<LockInfo> locks = {
      Held("alive", 1, absl::Seconds(1), absl::Seconds(9), true),
      Held("dead", 2, absl::Seconds(1), absl::Seconds(9), false),
      Held("unknown", 3, absl::Seconds(1), absl::Seconds(9))};
  LockInfo free_one;
  free_one.name = "free";
  free_one.holder_live = false;
  locks.push_back(free_one);
  std::vector<LockInfo> dead = DeadHolders(locks);
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].name, "dead");
  EXPECT_EQ(dead[0].fencing_token, 2u);
}

TEST(MonitorState, MetricsAreValidPrometheusText) {
  MonitorMetrics metrics("jobs");
  metrics.ScanSucceeded(3, 1);
  metrics.ScanFailed();
  metrics.HookRan(true);
  metrics.HookRan(false);
  metrics.ForceUnlocked();
  const std::string text = metrics.RenderText();
  EXPECT_THAT(text, HasSubstr("# TYPE dlock_monitor_locks_held gauge\n"
                              "dlock_monitor_locks_held{namespace=\"jobs\"} "
                              "3\n"));
  EXPECT_THAT(text, HasSubstr("dlock_monitor_held_too_long{namespace=\"jobs\"}"
                              " 1\n"));
  EXPECT_THAT(text, HasSubstr("dlock_monitor_scans_total{namespace=\"jobs\"} "
                              "2\n"));
  EXPECT_THAT(text, HasSubstr("dlock_monitor_scan_errors_total{namespace="
                              "\"jobs\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("dlock_monitor_hook_runs_total{namespace="
                              "\"jobs\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("dlock_monitor_hook_failures_total{namespace="
                              "\"jobs\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("dlock_monitor_force_unlocks_total{namespace="
                              "\"jobs\"} 1\n"));
  // Every sample line follows its HELP and TYPE lines.
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "#")) continue;
    EXPECT_TRUE(absl::StartsWith(line, "dlock_monitor_")) << line;
    EXPECT_THAT(text, HasSubstr(absl::StrCat(
                          "# TYPE ", line.substr(0, line.find('{')), " ")));
  }
}

TEST(LockTable, ColumnsAreAsWideAsTheirWidestCell) {
  const std::string name(45, 'n');
  EXPECT_EQ(AlignColumns({{"NAME", "TOKEN", "HOLDER"},
                          {name, "7", "me"},
                          {"b", "12345", "\xc3\xa9t\xc3\xa9"}},
                         {false, true, false}),
            absl::StrCat("NAME", std::string(43, ' '), "TOKEN  HOLDER\n", name,
                         "      7  me\n", "b", std::string(46, ' '),
                         "12345  \xc3\xa9t\xc3\xa9\n"));
  // Characters, not bytes: "été" is three wide.
  EXPECT_EQ(AlignColumns({{"\xc3\xa9t\xc3\xa9", "x"}, {"abcd", "y"}}),
            "\xc3\xa9t\xc3\xa9   x\nabcd  y\n");
}

TEST(LockTable, ALockIsTakeableWhenItsHolderIsNotLiveOrItsLeaseRanOut) {
  EXPECT_FALSE(Takeable(Held("a", 1, absl::Seconds(1), absl::Seconds(9))));
  EXPECT_FALSE(
      Takeable(Held("a", 1, absl::Seconds(1), absl::Seconds(9), true)));
  const LockInfo dead = Held("a", 1, absl::Seconds(1), absl::Minutes(9), false);
  EXPECT_TRUE(Takeable(dead));
  EXPECT_EQ(TakeableWhy(dead), "free to take over: its holder is not live");
  const LockInfo expired = Held("a", 1, absl::Seconds(1), absl::ZeroDuration());
  EXPECT_TRUE(Takeable(expired));
  EXPECT_EQ(TakeableWhy(expired), "free to take over: its lease ran out");
  EXPECT_FALSE(Takeable(LockInfo{.name = "free"}));
}

TEST(LockTable, LeasesHaveOnePrecisionWhateverTheBackendReported) {
  // Redis reports milliseconds, PostgreSQL microseconds.
  EXPECT_EQ(ShortDuration(absl::Milliseconds(598139)), "9m58s");
  EXPECT_EQ(ShortDuration(absl::Microseconds(598139412)), "9m58s");
  EXPECT_EQ(ShortDuration(absl::Microseconds(28958734)), "29.0s");
  EXPECT_EQ(ShortDuration(absl::Milliseconds(28959)), "29.0s");
  EXPECT_EQ(ShortDuration(absl::Milliseconds(29100)), "29.1s");
  EXPECT_EQ(ShortDuration(absl::Milliseconds(-3)), "0.0s");
  // Nobody holds a lock kept after its release: no liveness to tell.
  LockInfo kept = Held("k", 1, absl::Seconds(1), absl::Minutes(5));
  kept.kept_after_release = true;
  EXPECT_EQ(LiveText(kept), "-");
}

// top without a terminal: whole names, no key hints.
TEST(LockTable, TheSnapshotShowsWholeNamesAndNoKeys) {
  TopScreen screen{.endpoint = "redis://h:6379",
                   .lock_namespace = "jobs",
                   .interval = absl::Seconds(1),
                   .now = kNow};
  const std::string long_name =
      "a-very-long-lock-name-that-is-over-thirty-two-characters";
  screen.locks = {
      Held(long_name, 11, absl::Seconds(2), absl::Seconds(28), true),
      Held("short", 3, absl::Seconds(1), absl::Seconds(9), false)};
  const std::string out = RenderTopSnapshot(screen);
  EXPECT_THAT(out, HasSubstr(long_name + "  owner-of-" + long_name));
  EXPECT_THAT(out, Not(HasSubstr("~")));
  EXPECT_THAT(out, Not(HasSubstr("keys:")));
  std::vector<std::string> lines = absl::StrSplit(out, '\n');
  ASSERT_GE(lines.size(), 6u);
  EXPECT_EQ(lines[1], "2 locks - sort held-for - every 1s");
  EXPECT_TRUE(absl::StartsWith(lines[3], "LOCK  ")) << lines[3];
  // Every row's columns start where the header's do.
  EXPECT_EQ(lines[3].find("TOKEN") + 5, lines[4].find("11") + 2) << out;
  EXPECT_EQ(lines[3].find("TOKEN") + 5, lines[5].find(" 3 ") + 2) << out;
}

}  // namespace
}  // namespace dlock::cli
