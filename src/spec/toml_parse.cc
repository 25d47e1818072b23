#include "spec/toml_parse.h"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/check.h"

namespace pentamesh::spec {
namespace {

struct Range {
  char32_t first, last;
};
constexpr std::array<Range, 4> kUnsafe = {
    {{0x00A1, 0x0499}, {0x2C5E, 0x2FFF}, {0x3001, 0x3057}, {0xFB26, 0xFEFE}}};
constexpr char32_t kPrivateBase = 0xE000;

// Index of an unsafe code point among all unsafe ones, in order; nullopt for safe ones.
std::optional<char32_t> UnsafeIndex(char32_t c) {
  char32_t before = 0;
  for (const Range& r : kUnsafe) {
    if (c >= r.first && c <= r.last) return before + (c - r.first);
    before += r.last - r.first + 1;
  }
  return std::nullopt;
}

constexpr char32_t UnsafeCount() {
  char32_t n = 0;
  for (const Range& r : kUnsafe) n += r.last - r.first + 1;
  return n;
}

char32_t UnsafeAt(char32_t index) {
  for (const Range& r : kUnsafe) {
    if (index <= r.last - r.first) return r.first + index;
    index -= r.last - r.first + 1;
  }
  PM_CHECK(false) << "unsafe index out of range";
  return 0;
}

void AppendUtf8(std::string& out, char32_t c) {
  if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
  } else {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
  }
  out += static_cast<char>(0x80 | (c & 0x3F));
}

// A 2- or 3-byte UTF-8 sequence at text[i] (overlong forms included: the swap must not depend on
// how toml++'s decoder treats them): its code point and length; length 0 for anything else.
std::pair<char32_t, size_t> Decode23(std::string_view text, size_t i) {
  auto cont = [&](size_t at) {
    return at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80;
  };
  auto byte = [&](size_t at) {
    return static_cast<char32_t>(static_cast<unsigned char>(text[at]));
  };
  const char32_t b0 = byte(i);
  if ((b0 & 0xE0) == 0xC0 && cont(i + 1)) return {((b0 & 0x1F) << 6) | (byte(i + 1) & 0x3F), 2};
  if ((b0 & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
    return {((b0 & 0x0F) << 12) | ((byte(i + 1) & 0x3F) << 6) | (byte(i + 2) & 0x3F), 3};
  }
  return {0, 0};
}

// Swaps code points: unsafe -> private (to_private) or private -> unsafe. Returns the 1-based line
// of a private-use code point already present when swapping to private; 0 when none.
int64_t Swap(std::string_view text, bool to_private, std::string& out) {
  out.clear();
  out.reserve(text.size());
  int64_t line = 1;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '\n') ++line;
    const auto [c, len] = Decode23(text, i);
    if (len == 0) {
      out += text[i++];
      continue;
    }
    const bool is_private = c >= kPrivateBase && c < kPrivateBase + UnsafeCount();
    if (to_private && is_private) return line;
    if (to_private && UnsafeIndex(c)) {
      AppendUtf8(out, kPrivateBase + *UnsafeIndex(c));
    } else if (!to_private && is_private) {
      AppendUtf8(out, UnsafeAt(c - kPrivateBase));
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return 0;
}

std::string Restore(std::string_view s) {
  std::string out;
  Swap(s, /*to_private=*/false, out);
  return out;
}

void RestoreNode(toml::node& node) {
  if (toml::value<std::string>* s = node.as_string()) {
    s->get() = Restore(s->get());
  } else if (toml::array* a = node.as_array()) {
    for (toml::node& e : *a) RestoreNode(e);
  } else if (toml::table* t = node.as_table()) {
    std::vector<std::pair<std::string, std::string>> renames;
    for (auto&& [key, value] : *t) {
      RestoreNode(value);
      if (std::string restored = Restore(key.str()); restored != key.str())
        renames.emplace_back(std::string(key.str()), std::move(restored));
    }
    for (const std::pair<std::string, std::string>& rename : renames) {
      const std::string& to = rename.second;
      t->get(rename.first)->visit([&](auto& concrete) { t->insert_or_assign(to, concrete); });
      t->erase(rename.first);
    }
  }
}

}  // namespace

bool TomlPlusPlusUnsafe(char32_t c) { return UnsafeIndex(c).has_value(); }

core::Result<toml::table> ParseTomlText(std::string_view text, const std::string& source,
                                        TomlErrorAt* where) {
  std::string safe;
  if (const int64_t line = Swap(text, /*to_private=*/true, safe); line > 0) {
    const std::string what =
        fmt::format("private-use characters U+E000..U+{:04X} are not supported",
                    static_cast<uint32_t>(kPrivateBase + UnsafeCount() - 1));
    if (where) *where = {.line = line, .column = 0, .description = what};
    return core::Status::Error(fmt::format("{}:{}: malformed TOML: {}", source, line, what));
  }
  try {
    toml::table root = toml::parse(safe, source);
    RestoreNode(root);
    return root;
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    const std::string what = Restore(e.description());
    if (where) *where = {.line = begin.line, .column = begin.column, .description = what};
    return core::Status::Error(
        fmt::format("{}:{}:{}: malformed TOML: {}", source, begin.line, begin.column, what));
  }
}

}  // namespace pentamesh::spec
