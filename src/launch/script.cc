// Reading shell scripts and command lines as words (script.h's contract in internal.h): enough of
// bash for launch scripts: quotes, comments, continuations, NAME=value, ${NAME:-default}, arrays
// NAME=( ... ) / NAME+=( ... ) and their "${NAME[@]}" expansion. Anything else ($(...), $((...)),
// positional parameters) stays as literal text.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <regex>
#include <string_view>

#include "launch/internal.h"
#include "spec/limits.h"

namespace pentamesh::launch::internal {
namespace {

bool NameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Reader {
 public:
  Reader(const std::string& name, const std::string& text) : name_(name), t_(text) {}

  core::Result<Script> Run() {
    while (i_ < t_.size()) {
      PM_RETURN_IF_ERROR(Step());
    }
    PM_RETURN_IF_ERROR(EndWord());
    if (in_array_) {
      return core::Status::Error(
          fmt::format("{}: line {}: array '{}=(' is not closed", name_, array_line_, array_));
    }
    return std::move(out_);
  }

 private:
  core::Status Step() {
    const char c = t_[i_];
    if (c == '\\' && i_ + 1 < t_.size() && t_[i_ + 1] == '\n') {
      i_ += 2;
      ++line_;
      return core::Status::Ok();
    }
    if (c == '\n' || c == ';' || c == '|' || c == '&') {
      PM_RETURN_IF_ERROR(EndWord());
      if (c == '\n') ++line_;
      if (!in_array_) command_start_ = true;
      ++i_;
      return core::Status::Ok();
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      PM_RETURN_IF_ERROR(EndWord());
      ++i_;
      return core::Status::Ok();
    }
    if (c == '#' && !in_word_) {
      while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      return core::Status::Ok();
    }
    if (c == '(' && !in_word_) {
      ++i_;
      return core::Status::Ok();
    }
    if (c == '(' && in_word_ && !word_.empty() && word_.back() == '=' && !quoted_) {
      // NAME=( or NAME+=( starts an array.
      std::string n = word_.substr(0, word_.size() - 1);
      append_ = !n.empty() && n.back() == '+';
      if (append_) n.pop_back();
      array_ = n;
      array_line_ = line_;
      // Built aside and assigned at ')': bash expands the right side first, so A=( "${A[@]}" x )
      // reads the old A.
      pending_ = append_ ? arrays_[array_] : std::vector<Word>();
      in_array_ = true;
      in_word_ = false;
      word_.clear();
      ++i_;
      return core::Status::Ok();
    }
    if (c == ')' && !in_word_) {
      if (in_array_) {
        CloseArray();
        command_start_ = false;
      }
      ++i_;
      return core::Status::Ok();
    }
    if (c == ')' && in_array_) {
      PM_RETURN_IF_ERROR(EndWord());
      CloseArray();
      ++i_;
      return core::Status::Ok();
    }
    if (c == '\'') {
      const size_t end = t_.find('\'', i_ + 1);
      if (end == std::string::npos) {
        return core::Status::Error(fmt::format("{}: line {}: unterminated ' quote", name_, line_));
      }
      Begin();
      quoted_ = true;
      for (size_t k = i_ + 1; k < end; ++k) {
        if (t_[k] == '\n') ++line_;
        word_ += t_[k];
      }
      i_ = end + 1;
      return core::Status::Ok();
    }
    if (c == '"') {
      Begin();
      quoted_ = true;
      const int start_line = line_;
      ++i_;
      while (i_ < t_.size() && t_[i_] != '"') {
        if (t_[i_] == '\\' && i_ + 1 < t_.size()) {
          word_ += t_[i_ + 1];
          i_ += 2;
          continue;
        }
        if (t_[i_] == '$') {
          PM_RETURN_IF_ERROR(Dollar(/*quoted=*/true));
          continue;
        }
        if (t_[i_] == '\n') ++line_;
        word_ += t_[i_++];
      }
      if (i_ >= t_.size()) {
        return core::Status::Error(
            fmt::format("{}: line {}: unterminated \" quote", name_, start_line));
      }
      ++i_;
      return core::Status::Ok();
    }
    if (c == '$') return Dollar(/*quoted=*/false);
    Begin();
    word_ += c;
    ++i_;
    return core::Status::Ok();
  }

  void Begin() {
    if (!in_word_) {
      in_word_ = true;
      word_line_ = line_;
      quoted_ = false;
    }
  }

  // $NAME, ${NAME}, ${NAME:-default}, ${NAME[@]}; $( ... ) copied literally.
  core::Status Dollar(bool quoted) {
    Begin();
    if (i_ + 1 < t_.size() && t_[i_ + 1] == '(') {
      int depth = 0;
      size_t k = i_ + 1;
      for (; k < t_.size(); ++k) {
        if (t_[k] == '(') ++depth;
        if (t_[k] == ')' && --depth == 0) break;
      }
      word_ += t_.substr(i_, k + 1 - i_);
      i_ = std::min(k + 1, t_.size());
      return core::Status::Ok();
    }
    if (i_ + 1 < t_.size() && t_[i_ + 1] == '{') {
      const size_t end = t_.find('}', i_ + 2);
      if (end == std::string::npos) {
        return core::Status::Error(fmt::format("{}: line {}: unterminated ${{", name_, line_));
      }
      const std::string body = t_.substr(i_ + 2, end - i_ - 2);
      i_ = end + 1;
      static const std::regex kArray(R"(^([A-Za-z_][A-Za-z0-9_]*)\[[@*]\]$)");
      std::smatch m;
      if (std::regex_match(body, m, kArray)) {
        // Splice the array: each element becomes its own word.
        const auto it = arrays_.find(m[1]);
        if (it != arrays_.end()) {
          const bool had = in_word_ && !word_.empty();
          if (had) EmitWord();
          if (command_start_ && !in_array_) {  // the array starts a command
            ++command_;
            command_start_ = false;
          }
          // Doubling an array per line (A=( "${A[@]}" "${A[@]}" )) must stay bounded.
          const std::vector<Word>& words = it->second;
          for (const Word& w : words) expanded_bytes_ += w.text.size() + 1;
          if (expanded_bytes_ > kMaxExpandedBytes) {
            return core::Status::Error(
                fmt::format("{}: line {}: ${{{}}}: the expansions exceed {} bytes", name_, line_,
                            body, kMaxExpandedBytes));
          }
          for (Word w : words) {
            w.command = command_;
            Push(w);
          }
          in_word_ = false;
          word_.clear();
        }
        (void)quoted;
        return core::Status::Ok();
      }
      const size_t dash = body.find(":-");
      const std::string var = dash == std::string::npos ? body : body.substr(0, dash);
      const auto it = out_.vars.find(var);
      if (it != out_.vars.end()) {
        return Expand(it->second);
      } else if (dash != std::string::npos) {
        std::string def = body.substr(dash + 2);
        if (def.size() >= 2 && (def.front() == '"' || def.front() == '\'') &&
            def.back() == def.front()) {
          def = def.substr(1, def.size() - 2);
        }
        return Expand(def);
      }
      word_ += "${" + body + "}";
      return core::Status::Ok();
    }
    size_t k = i_ + 1;
    while (k < t_.size() && NameChar(t_[k])) ++k;
    const std::string var = t_.substr(i_ + 1, k - i_ - 1);
    i_ = k;
    const auto it = out_.vars.find(var);
    if (it != out_.vars.end()) return Expand(it->second);
    word_ += "$" + var;
    return core::Status::Ok();
  }

  // Appends a variable's value to the word, counted against kMaxExpandedBytes.
  core::Status Expand(const std::string& value) {
    expanded_bytes_ += value.size();
    if (expanded_bytes_ > kMaxExpandedBytes) {
      return core::Status::Error(fmt::format("{}: line {}: variable expansions exceed {} bytes",
                                             name_, line_, kMaxExpandedBytes));
    }
    word_ += value;
    return core::Status::Ok();
  }

  void CloseArray() {
    arrays_[array_] = std::move(pending_);
    pending_.clear();
    in_array_ = false;
  }

  void Push(const Word& w) {
    if (in_array_) {
      pending_.push_back(w);
    } else {
      out_.words.push_back(w);
    }
  }

  void EmitWord() {
    if (command_start_ && !in_array_) ++command_;
    Push(Word{word_, word_line_, command_});
    word_.clear();
  }

  core::Status EndWord() {
    if (!in_word_) return core::Status::Ok();
    in_word_ = false;
    // NAME=value (checked by hand: std::regex recurses per character and overflows the stack on
    // a word of megabytes).
    const size_t eq = word_.find('=');
    if (command_start_ && !in_array_ && eq != std::string::npos && eq > 0 &&
        !std::isdigit(static_cast<unsigned char>(word_[0])) &&
        std::all_of(word_.begin(), word_.begin() + static_cast<std::ptrdiff_t>(eq), NameChar)) {
      out_.vars[word_.substr(0, eq)] = word_.substr(eq + 1);
      word_.clear();
      return core::Status::Ok();  // an assignment: the command (if any) starts after it
    }
    if (command_start_ && (word_ == "export" || word_ == "local" || word_ == "declare")) {
      word_.clear();
      return core::Status::Ok();
    }
    EmitWord();
    if (!in_array_) command_start_ = false;
    return core::Status::Ok();
  }

  std::string name_;
  const std::string& t_;
  size_t i_ = 0;
  int line_ = 1;
  bool in_word_ = false;
  bool quoted_ = false;
  bool command_start_ = true;
  int command_ = 0;  // commands started so far (Word::command)
  int word_line_ = 1;
  std::string word_;
  bool in_array_ = false;
  bool append_ = false;
  std::string array_;
  int array_line_ = 0;
  std::map<std::string, std::vector<Word>> arrays_;
  std::vector<Word> pending_;  // the array being defined (assigned to arrays_ at its ')')
  // Bytes that variable and array expansions may add over the whole script: a variable or array
  // defined from itself twice per line grows exponentially (a launch script expands kilobytes).
  static constexpr size_t kMaxExpandedBytes = size_t{16} << 20;
  size_t expanded_bytes_ = 0;
  Script out_;
};

}  // namespace

core::Result<Script> ReadScript(const std::string& name, const std::string& text) {
  return Reader(name, text).Run();
}

std::map<std::string, FlagValue> CollectFlags(const std::vector<Word>& words) {
  // A word "--flag value" (one quoted word) counts as two.
  std::vector<Word> split;
  for (const Word& w : words) {
    if (w.text.rfind("--", 0) == 0 && w.text.find(' ') != std::string::npos) {
      size_t start = 0;
      while (start < w.text.size()) {
        const size_t sp = w.text.find(' ', start);
        const std::string part = w.text.substr(start, sp - start);
        if (!part.empty()) split.push_back(Word{part, w.line});
        if (sp == std::string::npos) break;
        start = sp + 1;
      }
    } else {
      split.push_back(w);
    }
  }
  std::map<std::string, FlagValue> out;
  std::string current;
  for (const Word& w : split) {
    if (w.text.rfind("--", 0) == 0 && w.text.size() > 2) {
      std::string flag = w.text;
      std::string value;
      const size_t eq = flag.find('=');
      if (eq != std::string::npos) {
        value = flag.substr(eq + 1);
        flag = flag.substr(0, eq);
      }
      current = flag;
      out[current] = FlagValue{{}, w.line};
      if (eq != std::string::npos) out[current].values.push_back(value);
    } else if (!current.empty()) {
      out[current].values.push_back(w.text);
    }
  }
  return out;
}

bool IsEntryWord(const std::string& text) {
  // (^|/)pretrain_[A-Za-z0-9_]*\.py$, by hand (no regex recursion on long words).
  const size_t slash = text.rfind('/');
  const std::string_view base =
      std::string_view(text).substr(slash == std::string::npos ? 0 : slash + 1);
  return base.starts_with("pretrain_") && base.ends_with(".py") &&
         std::all_of(base.begin() + 9, base.end() - 3, NameChar);
}

std::vector<Word> EntryArgv(const Script& script, std::string* entry) {
  for (size_t i = 0; i < script.words.size(); ++i) {
    if (!IsEntryWord(script.words[i].text)) continue;
    if (entry != nullptr) *entry = script.words[i].text;
    std::vector<Word> argv;
    for (size_t k = i + 1; k < script.words.size(); ++k) {
      if (script.words[k].command != script.words[i].command) break;
      argv.push_back(script.words[k]);
    }
    return argv;
  }
  return script.words;
}

core::Result<std::optional<int64_t>> WorldFromScript(const std::string& text,
                                                     std::optional<int64_t>* per_node) {
  // Each directive is held to the input rules (spec/limits.h): a 20-digit count is an error
  // naming it, and the world is an overflow-checked product.
  auto directive = [&](const char* key) -> core::Result<std::optional<int64_t>> {
    const std::regex re(std::string(R"((?:^|\n)#SBATCH\s+)") + key + R"([=\s]+(\d+))");
    std::smatch m;
    if (!std::regex_search(text, m, re)) return std::optional<int64_t>();
    PM_ASSIGN_OR_RETURN(const int64_t v, spec::ParseInt(std::string("#SBATCH ") + key, m[1].str(),
                                                        1, spec::kMaxGpus));
    return std::optional<int64_t>(v);
  };
  PM_ASSIGN_OR_RETURN(const auto nodes, directive("--nodes"));
  // GPUs per node first: a torchrun job asks for one task per node and all its GPUs.
  PM_ASSIGN_OR_RETURN(auto gpn, directive("--gpus-per-node"));
  if (!gpn) {
    PM_ASSIGN_OR_RETURN(gpn, directive("--ntasks-per-node"));
  }
  if (per_node != nullptr) *per_node = gpn;
  if (!nodes || !gpn) return std::optional<int64_t>();
  PM_ASSIGN_OR_RETURN(const int64_t world,
                      spec::GpuProduct("#SBATCH --nodes x GPUs per node", {*nodes, *gpn}));
  return std::optional<int64_t>(world);
}

}  // namespace pentamesh::launch::internal
