// Escaping of values written into files other programs read: one function per target language,
// used by every emitter (launch/'s scripts and TOML, calib/'s profiles, tune's --set values), so a
// name or path from the user never becomes code there.
//
// Invariant: bash reads ShellQuote(s) as exactly one word whose value is s (for any s without a
// NUL byte); a TOML parser reads TomlString(s) as the string s (for valid UTF-8 s); and
// CommentText(s) is one line of printable text (no control character, valid UTF-8), so a
// comment cannot end early and start a command or a key.
#pragma once

#include <string>
#include <string_view>

namespace pentamesh::core {

// One shell word (POSIX sh and bash) whose value is `s`: `s` itself when it consists only of
// characters no shell treats specially ([A-Za-z0-9_@%+=:,./-], not empty), else `s` in single
// quotes with each ' written as '\''. Newlines, $(), backticks, globs, spaces and unicode are
// literal inside the quotes. A NUL byte cannot be in a shell word; it is written as the two
// characters \0.
std::string ShellQuote(std::string_view s);

// A TOML basic string "..." whose value is `s`: ", \ and control characters escaped (\n, \t,
// \u001B, ...). Bytes that are not valid UTF-8 cannot be in a TOML string; each becomes U+FFFD.
std::string TomlString(std::string_view s);

// A TOML key (a table name's part, a key before =) that reads back as `s`: `s` itself when it is
// a bare key ([A-Za-z0-9_-], not empty), else TomlString(s) (a quoted key).
std::string TomlKey(std::string_view s);

// `s` made safe as the text of one comment line (shell, TOML): control characters as \n, \r, \t
// or \xNN, a backslash as \\, bytes that are not valid UTF-8 as \xNN; everything else unchanged.
std::string CommentText(std::string_view s);

}  // namespace pentamesh::core
