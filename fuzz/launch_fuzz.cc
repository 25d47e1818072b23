// libFuzzer target: arbitrary bytes as an engine config for import-config (a Megatron-LM or
// Megatron-DeepSpeed script, a torchtitan TOML, a ds_config.json; the first byte picks the file
// name, so each importer and the engine detection are reached) and as a name for the emitters'
// escaping (core/quote.h). Import must return a value or a Status naming the file and line or key,
// never crash; an imported layout is valid for its own model. The escapes keep their invariants:
// CommentText is one line of printable text, ShellQuote is quoted whenever the text holds a byte
// a shell treats specially, TomlString reads back as the text (valid UTF-8) through toml++.
#include <cstddef>
#include <cstdint>
#include <string>

#include <toml++/toml.h>

#include "core/quote.h"
#include "launch/launch.h"

namespace {

bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80             ? 1
               : (c & 0xE0) == 0xC0 ? 2
               : (c & 0xF0) == 0xE0 ? 3
               : (c & 0xF8) == 0xF0 ? 4
                                    : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

void CheckEscapes(const std::string& text) {
  using namespace pentamesh;
  for (const unsigned char c : core::CommentText(text)) {
    if (c < 0x20 || c == 0x7F) __builtin_trap();  // a comment would end early
  }
  const std::string word = core::ShellQuote(text);
  if (text.empty() || text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                             "0123456789_@%+=:,./-") != std::string::npos) {
    if (word.size() < 2 || word.front() != '\'' || word.back() != '\'') __builtin_trap();
  } else if (word != text) {
    __builtin_trap();
  }
  if (ValidUtf8(text) && text.find('\0') == std::string::npos) {
    try {
      const toml::table t = toml::parse("v = " + core::TomlString(text) + "\n");
      if (t["v"].value<std::string>() != text || t.size() != 1) __builtin_trap();
    } catch (const toml::parse_error&) {
      __builtin_trap();  // TomlString wrote something TOML cannot read
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pentamesh;
  if (size == 0) return 0;
  static const char* const kNames[] = {"train.sh", "launch.sh", "job.toml", "ds_config.json",
                                       "args.txt"};
  const std::string name = kNames[data[0] % 5];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  CheckEscapes(text);
  launch::ImportOptions options;
  options.gpus = 64;
  options.seq_len = 4096;
  options.model = "llama3-8b";
  options.allow_unknown = (data[0] & 0x80) != 0;
  // pentamesh's own readers, not bash: running every input under bash in the sandbox would fuzz
  // bash (tests/launch/sandbox_test.cc covers the bash evaluation).
  options.shell = launch::Shell::kBuiltin;
  // A directory that holds nothing: the importers look for sbatch.sh and ds_config.json there.
  const auto imported = launch::ImportText(name, text, "/nonexistent-pentamesh-fuzz", options);
  if (imported.ok() && imported->layout.gpus() <= 0) __builtin_trap();
  return 0;
}
