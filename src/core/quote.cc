#include "core/quote.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace pentamesh::core {
namespace {

bool ShellSafe(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '_':
    case '@':
    case '%':
    case '+':
    case '=':
    case ':':
    case ',':
    case '.':
    case '/':
    case '-':
      return true;
    default:
      return false;
  }
}

// Length of the valid UTF-8 sequence starting at s[i] (1..4), or 0 when s[i] starts none
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

std::string ShellQuote(std::string_view s) {
  bool safe = !s.empty();
  for (const char c : s) safe = safe && ShellSafe(c);
  if (safe) return std::string(s);
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else if (c == '\0') {
      out += "\\0";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string TomlKey(std::string_view s) {
  const bool bare = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
  return bare ? std::string(s) : TomlString(s);
}

std::string TomlString(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    const size_t n = Utf8Length(s, i);
    if (n == 0) {
      out += "\\uFFFD";
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<uint8_t>(c) < 0x20 || c == 0x7F) {
          out += fmt::format("\\u{:04X}", static_cast<unsigned>(static_cast<uint8_t>(c)));
        } else {
          out += c;
        }
    }
    ++i;
  }
  return out + "\"";
}

std::string CommentText(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    const size_t n = Utf8Length(s, i);
    if (n > 1) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    if (n == 0 || static_cast<uint8_t>(c) < 0x20 || c == 0x7F) {
      if (c == '\n') {
        out += "\\n";
      } else if (c == '\r') {
        out += "\\r";
      } else if (c == '\t') {
        out += "\\t";
      } else {
        out += fmt::format("\\x{:02X}", static_cast<unsigned>(static_cast<uint8_t>(c)));
      }
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out += c;
    }
    ++i;
  }
  return out;
}

}  // namespace pentamesh::core
