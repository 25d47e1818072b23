// TOML parsing for specs, run configs, stack and host profiles: toml::parse behind a guard for
// toml++ 3.3's unreachable branch, with parse errors turned into a Status naming source, line and
// column. (launch/torchtitan.cc's ImportTorchtitan calls toml::parse directly, without it.)
// Invariant: toml++ never sees a code point on which it reaches __builtin_unreachable (see
// TomlPlusPlusUnsafe), and the table handed back holds exactly the text's keys and strings.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace pentamesh::spec {

// True for the code points on which toml++ 3.3 (Debian 12)'s is_non_ascii_horizontal_whitespace
// reaches __builtin_unreachable (its lookup table has no branch for them): U+00A1..U+0499,
// U+2C5E..U+2FFF, U+3001..U+3057 and U+FB26..U+FEFE (Latin-1, Greek, Cyrillic, some CJK
// punctuation and kana, Arabic presentation forms). The parser asks that question of characters
// in keys, values and after backslashes in strings (found by fuzz/toml_fuzz.cc).
bool TomlPlusPlusUnsafe(char32_t c);

// Parses `text`. The unsafe code points are swapped for private-use ones (U+E000 + their index)
// before toml++ sees them and swapped back in every key and string of the result; text that
// already holds one of those private-use code points is refused, naming the line.
// `where`, when given, receives the error's line (1-based, 0 when there is none), column and
// description without the location, for callers that word errors their own way.
struct TomlErrorAt {
  int64_t line = 0;
  int64_t column = 0;
  std::string description;
};
core::Result<toml::table> ParseTomlText(std::string_view text, const std::string& source,
                                        TomlErrorAt* where = nullptr);

}  // namespace pentamesh::spec
