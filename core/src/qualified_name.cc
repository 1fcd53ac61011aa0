#include "qualified_name.h"

#include "absl/strings/str_cat.h"

namespace dlock::internal {
namespace {

constexpr char kMark = '\x1f';

char LetterOf(const HoldShape& shape) {
  switch (shape.kind) {
    case ObjectKind::kLock:
      return shape.mode == HoldMode::kShared ? 'r' : '\0';
    case ObjectKind::kSemaphore:
      return 's';
    case ObjectKind::kElection:
      return 'e';
  }
  return '\0';
}

}  // namespace

std::string QualifiedName(absl::string_view name, const HoldShape& shape) {
  const char letter = LetterOf(shape);
  if (letter == '\0') return std::string(name);
  return absl::StrCat(absl::string_view(&kMark, 1),
                      absl::string_view(&letter, 1), name);
}

absl::string_view ObjectNameOf(absl::string_view key) {
  return IsQualified(key) && key.size() >= 2 ? key.substr(2) : key;
}

HoldShape ShapeOf(absl::string_view key) {
  if (!IsQualified(key) || key.size() < 2) return HoldShape{};
  switch (key[1]) {
    case 'r':
      return HoldShape{.kind = ObjectKind::kLock, .mode = HoldMode::kShared};
    case 's':
      return HoldShape{.kind = ObjectKind::kSemaphore,
                       .mode = HoldMode::kPermits};
    case 'e':
      return HoldShape{.kind = ObjectKind::kElection};
  }
  return HoldShape{};
}

std::string ObjectPhrase(absl::string_view key) {
  const HoldShape shape = ShapeOf(key);
  const absl::string_view kind =
      shape.kind == ObjectKind::kLock && shape.mode == HoldMode::kShared
          ? "read lock"
          : ObjectKindName(shape.kind);
  return absl::StrCat(kind, " '", ObjectNameOf(key), "'");
}

}  // namespace dlock::internal
