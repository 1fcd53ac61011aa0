#include "zk_driver.h"

#include <algorithm>
#include <limits>

namespace dlock::zk {

QueueView LookAtQueue(std::vector<std::string> children, absl::string_view own,
                      const std::vector<std::string>& foreign) {
  QueueView view;
  // Kept-lock nodes keep the lock taken past its last release.
  for (const std::string& child : children) {
    if (IsKeptNode(child) &&
        std::find(foreign.begin(), foreign.end(), child) == foreign.end()) {
      view.kept.push_back(child);
    }
  }
  const std::vector<std::string> queue = SortedQueue(std::move(children));
  auto mine = std::find(queue.begin(), queue.end(), own);
  if (mine == queue.end()) {
    view.position = QueueView::Position::kGone;
  } else if (mine == queue.begin()) {
    view.position = view.kept.empty() ? QueueView::Position::kFirst
                                      : QueueView::Position::kKept;
  } else {
    view.position = QueueView::Position::kBehind;
    view.holder = queue.front();
    view.predecessor = *std::prev(mine);
    view.next_in_line = mine == std::next(queue.begin());
    for (auto it = queue.begin(); it != mine; ++it) {
      if (IsReadNode(*it)) view.reads_ahead.push_back(*it);
    }
  }
  return view;
}

std::optional<int64_t> KeptEnd(const Reply& read) {
  std::optional<KeptData> data = ParseKept(read.data);
  if (!data.has_value()) return std::nullopt;
  return read.stat.mtime + data->keep_ms;
}

int64_t LeaseEnd(const Reply& read) {
  std::optional<NodeData> data = Parse(read.data);
  if (!data.has_value()) return std::numeric_limits<int64_t>::max();
  return read.stat.mtime + data->lease_ms;
}

}  // namespace dlock::zk
