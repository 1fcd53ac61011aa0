// Copyright dlock authors. Conformance: lock names (C15) and namespaces (C16).
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "conformance_fixture.h"

namespace dlock::test {
namespace {

// Every kind of name C15 lists, in groups that a careless key, path or SQL
// encoding would map to one object: each must be a lock of its own.
std::vector<std::string> TrickyNames() {
  std::vector<std::string> names = {
      // Paths: separators, parents, normalization.
      "a",
      "a/b",
      "/a/b",
      "a/b/",
      "a//b",
      "./a",
      "..",
      "../a",
      "a/../b",
      "b",
      // Key syntax: separators, hash tags, globs.
      "a:b",
      "a.b",
      "a|b",
      "a#b",
      "{a}",
      "{a}b",
      "a{b}",
      "}{",
      "{",
      "}",
      "*",
      "a*",
      "?",
      "[ab]",
      "a\\b",
      "%",
      "a%2Fb",
      "$1",
      // Quotes and injection.
      "\"a\"",
      "'a'",
      "`a`",
      "x'); DROP TABLE t; --",
      "a\"; DEL *; \"",
      // Spaces.
      " ",
      "  ",
      " a",
      "a ",
      "a b",
      // Non-Latin text, and one letter in two Unicode spellings (C15 maps
      // bytes, it does not normalize).
      "锁/名字",
      "锁",
      "名字",
      "замок",
      "🔒",
      "\xc3\xa9",
      "e\xcc\x81",
      // Names that look like the namespace or another namespace's keys.
      "default",
      "default:a",
      "dlock",
      "dlock:a",
  };
  // The longest names: 512 bytes, differing only in the last byte, and 512
  // bytes of three-byte characters.
  names.push_back(std::string(511, 'x') + "y");
  names.push_back(std::string(511, 'x') + "z");
  std::string wide;
  while (wide.size() + 3 <= 512) wide += "锁";
  names.push_back(wide + std::string(512 - wide.size(), 'w'));
  return names;
}

TEST_P(Conformance, C15_EveryKindOfNameIsADistinctLock) {
  const std::vector<std::string> names = TrickyNames();
  ASSERT_EQ(std::set<std::string>(names.begin(), names.end()).size(),
            names.size());
  ASSERT_OK_AND_ASSIGN(auto holder, NewClient());
  ASSERT_OK_AND_ASSIGN(auto observer, NewClient());
  ASSERT_OK_AND_ASSIGN(auto elsewhere, NewClientIn(OtherNamespace("names")));

  std::map<std::string, uint64_t> tokens;
  std::map<std::string, Hold> holds;  // held until released below
  for (const std::string& name : names) {
    ASSERT_OK_AND_ASSIGN(auto lock, holder->GetLock(name));
    EXPECT_EQ(lock->name(), name);
    ASSERT_OK_AND_ASSIGN(Hold acquired,
                         lock->TryAcquire(WithLease(kLongLease)));
    // A name that mapped onto an earlier one would be a re-entry.
    EXPECT_EQ(acquired.hold_count(), 1) << "'" << name << "' collides";
    tokens[name] = acquired.fencing_token();
    holds[name] = std::move(acquired);
  }
  for (const std::string& name : names) {
    ASSERT_OK_AND_ASSIGN(auto lock, observer->GetLock(name));
    ASSERT_OK_AND_ASSIGN(LockInfo info, observer->Admin().Inspect(name));
    EXPECT_EQ(info.name, name);
    EXPECT_TRUE(info.locked) << name;
    EXPECT_EQ(info.owner, holder->CurrentOwner()) << name;
    EXPECT_EQ(info.hold_count, 1) << name;
    EXPECT_EQ(info.fencing_token, tokens[name]) << name;
    EXPECT_CODE(lock->TryAcquire(), kDeadlineExceeded) << name;
  }
  ASSERT_OK_AND_ASSIGN(std::optional<std::set<std::string>> listed,
                       ListedNames(*observer));
  if (listed.has_value()) {
    EXPECT_EQ(*listed, std::set<std::string>(names.begin(), names.end()));
  }
  // None of them reached another namespace.
  for (const std::string& name : names) {
    ASSERT_OK_AND_ASSIGN(auto lock, elsewhere->GetLock(name));
    ASSERT_OK_AND_ASSIGN(Hold acquired,
                         lock->TryAcquire(WithLease(kLongLease)));
    EXPECT_EQ(acquired.hold_count(), 1) << name;
    EXPECT_OK(acquired.Release());
  }
  for (const std::string& name : names) {
    EXPECT_OK(holds[name].Release()) << name;
    ASSERT_OK_AND_ASSIGN(LockInfo info, holder->Admin().Inspect(name));
    EXPECT_FALSE(info.locked) << name;
  }
}

// Rejected by GetLock itself: no handle, so nothing can reach the backend.
TEST_P(Conformance, C15_BadNamesAreRejectedByGetLock) {
  ASSERT_OK_AND_ASSIGN(auto client, NewClient());
  const std::vector<std::string> bad = {
      "",
      std::string(513, 'x'),
      std::string(510, 'x') + "锁",  // 513 bytes, cut inside no character
      "\xff",
      "a\xc0\xaf"
      "b",                 // overlong '/'
      "\xe9\x94",          // a character cut short
      "\xed\xa0\x80",      // a UTF-16 surrogate
      "\xf4\x90\x80\x80",  // past U+10FFFF
      "a\nb",
      "\t",
      std::string("a\0b", 3),
      "\x7f",
      "\xc2\x85",  // a C1 control character
      "\x1b[31mred",
  };
  for (const std::string& name : bad) {
    EXPECT_CODE(client->GetLock(name), kInvalidArgument)
        << "name of " << name.size() << " bytes";
  }
  ASSERT_OK_AND_ASSIGN(std::optional<std::set<std::string>> listed,
                       ListedNames(*client));
  if (listed.has_value()) {
    EXPECT_TRUE(listed->empty());
  }
}

// Locks in different namespaces never interact, including namespaces whose
// names a careless key encoding would run together with lock names.
TEST_P(Conformance, C16_NamespacesNeverInteract) {
  const std::string sub_ns = OtherNamespace("b");  // "<ns>.b"
  ASSERT_OK_AND_ASSIGN(auto outer, NewClient());
  ASSERT_OK_AND_ASSIGN(auto inner, NewClientIn(sub_ns));
  EXPECT_EQ(outer->lock_namespace(), ns());
  EXPECT_EQ(inner->lock_namespace(), sub_ns);

  // In <ns>: names that, joined to <ns> with some separator, spell <ns>.b
  // joined to "x".
  std::vector<Hold> outer_holds;
  for (const char* name : {"b:x", "b.x", "b/x", "b|x", "b{x", "b}x", ".b:x",
                           ".b.x", ".b/x", "b:{x}", "x", "shared"}) {
    ASSERT_OK_AND_ASSIGN(auto lock, outer->GetLock(name));
    ASSERT_OK_AND_ASSIGN(Hold hold, lock->TryAcquire(WithLease(kLongLease)));
    outer_holds.push_back(std::move(hold));
  }
  ASSERT_OK_AND_ASSIGN(auto inner_x, inner->GetLock("x"));
  ASSERT_OK_AND_ASSIGN(Hold x, inner_x->TryAcquire(WithLease(kLongLease)));
  EXPECT_EQ(x.hold_count(), 1);
  ASSERT_OK_AND_ASSIGN(auto inner_shared, inner->GetLock("shared"));
  ASSERT_OK_AND_ASSIGN(LockInfo info, inner->Admin().Inspect("shared"));
  EXPECT_FALSE(info.locked) << "a lock of <ns> is visible in <ns>.b";
  // Kept: the force unlock below ends it.
  ASSERT_OK_AND_ASSIGN(Hold inner_shared_hold,
                       inner_shared->TryAcquire(WithLease(kLongLease)));

  // Force and list stay inside their namespace too.
  ASSERT_OK(inner->Admin().ForceUnlock("shared"));
  ASSERT_OK_AND_ASSIGN(info, outer->Admin().Inspect("shared"));
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.owner, outer->CurrentOwner());
  ASSERT_OK_AND_ASSIGN(std::optional<std::set<std::string>> listed,
                       ListedNames(*inner));
  if (listed.has_value()) {
    EXPECT_EQ(*listed, std::set<std::string>{"x"});
  }
  for (Hold& hold : outer_holds) EXPECT_OK(hold.Release());
  ASSERT_OK_AND_ASSIGN(info, inner->Admin().Inspect("x"));
  EXPECT_TRUE(info.locked);
  EXPECT_OK(x.Release());
}

}  // namespace
}  // namespace dlock::test
