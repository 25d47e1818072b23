// Compact action names ("F3", "B1", "W1", "F3.1").
#include "schedule/action.h"

#include <fmt/format.h>

namespace pentamesh::schedule {

char KindLetter(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return 'F';
    case ActionKind::kBackward:
      return 'B';
    case ActionKind::kWeight:
      return 'W';
  }
  return '?';
}

std::string ToString(const Action& action, bool show_chunk) {
  if (show_chunk)
    return fmt::format("{}{}.{}", KindLetter(action.kind), action.microbatch, action.chunk);
  return fmt::format("{}{}", KindLetter(action.kind), action.microbatch);
}

}  // namespace pentamesh::schedule
