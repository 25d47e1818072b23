// Evaluating a launch script with bash itself (sandbox.h's contract in internal.h): the script
// runs under `bash` in a temporary directory with recording stand-ins for the launchers first on
// PATH; each stand-in writes its working directory and argv (NUL-separated, one file per process)
// and exits 0, so the importer reads the command lines the engine would have received.
//
// Isolation, the strongest this host allows (probed once per process):
//   read-only  unshare --mount --net (--map-root-user when not root): no network; every mount
//              read-only except the temporary directory; the working directory is an overlay of
//              the script's own directory (its templates readable, writes kept in the overlay)
//   no-network unshare --net: no network; writes outside the temporary directory not prevented
//   none       neither namespace could be made: HOME, TMPDIR and the working directory are still
//              the temporary directory's
// Always: an empty environment but PATH, HOME, TMPDIR, LANG; stdin /dev/null; the script's own
// process group, killed after the time limit (core::RunProcess) or when the script ends (its
// background jobs).
#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>

#include "core/find_on_path.h"
#include "core/quote.h"
#include "core/subprocess.h"
#include "launch/internal.h"
#include "spec/load_toml.h"

namespace pentamesh::launch::internal {
namespace {

namespace fs = std::filesystem;

// Commands the scripts run that stand-ins replace: the launchers, the interpreters and the tools
// that would reach a GPU, a cluster or the network. srun runs the command it wraps (its own
// flags skipped), sbatch runs the batch script it is given (a file, or stdin for a heredoc); the
// others only record.
constexpr const char* kRecorders[] = {
    "torchrun", "python",   "python3", "deepspeed", "mpirun", "mpiexec", "nvidia-smi",
    "pip",      "pip3",     "git",     "wget",      "curl",   "ssh",     "pdsh",
    "ds_ssh",   "scontrol", "squeue",  "sacct",     "nsys",   "ncu",     "conda",
    "module",   "apt-get",  "docker",  "enroot",    "uv",     "srun",    "sbatch"};

// The training entry points of a Megatron-LM / Megatron-DeepSpeed checkout's root.
constexpr const char* kEntryPoints[] = {"pretrain_gpt.py", "pretrain_mamba.py", "pretrain_bert.py",
                                        "pretrain_t5.py"};

// srun's and sbatch's options that take a separate value (slurm 23's man pages); any other
// option is one word (--opt=value or a switch).
constexpr const char* kSlurmValueOptions =
    " -A -b -c -C -d -D -e -G -i -J -L -m -M -n -N -o -p -q -S -t -w -x --account --begin "
    "--cpus-per-task --chdir --dependency --error --input --job-name --licenses --distribution "
    "--nodes --ntasks --output --partition --qos --time --nodelist --exclude --gpus "
    "--gpus-per-node --gpus-per-task --gres --mem --mem-per-cpu --mem-per-gpu --ntasks-per-node "
    "--cpu-bind --mpi --container-image --container-mounts --container-name --container-workdir "
    "--container-env --export --constraint --reservation --clusters --comment --signal --wckey "
    "--array --account --nodefile --network --cpus-per-gpu --tasks-per-node ";

// One stand-in: record, then (srun, sbatch) run what it wraps.
std::string StandIn(const std::string& bash, const std::string& name) {
  std::string s = "#!" + bash + "\n";
  s += "# pentamesh import-config stand-in for '" + name +
       "': records its argv (NUL-separated) and exits 0\n";
  s += "rec=\"$PM_RECORD_DIR/${EPOCHREALTIME/./}.$$\"\n";
  s += "printf '%s\\0' \"$PWD\" \"" + name +
       "\" \"$@\" > \"$rec.part\" && mv \"$rec.part\" \"$rec\"\n";
  if (name == "srun" || name == "sbatch") {
    s += "value_opts='" + std::string(kSlurmValueOptions) + "'\n";
    s += "while [ $# -gt 0 ]; do\n"
         "  case \"$1\" in\n"
         "    --) shift; break ;;\n"
         "    --*=*) shift ;;\n"
         "    -*) if [[ \"$value_opts\" == *\" $1 \"* ]]; then shift 2; else shift; fi ;;\n"
         "    *) break ;;\n"
         "  esac\n"
         "done\n";
    if (name == "srun") {
      s += "[ $# -gt 0 ] && exec \"$@\"\nexit 0\n";
    } else {
      s += "if [ $# -eq 0 ]; then\n"
           "  batch=\"$PM_SANDBOX/sbatch.$$\"; cat > \"$batch\"; set -- \"$batch\"\n"
           "fi\n"
           "exec " +
           bash + " \"$@\"\n";
    }
  } else {
    s += "exit 0\n";
  }
  return s;
}

// The wrapper run inside the namespaces: `wrapper.sh MODE SCRIPT LOWER` where MODE is probe,
// readonly or plain. readonly (and probe) make every mount but the sandbox read-only and mount
// the working directory as an overlay of LOWER (the script's directory) when it can; exit 97
// when the read-only mounts fail.
std::string Wrapper(const std::string& bash) {
  return "#!" + bash +
         "\n"
         "mode=$1; script=$2; lower=$3\n"
         "if [ \"$mode\" != plain ]; then\n"
         "  mount --make-rprivate / || exit 97\n"
         "  mount --bind \"$PM_SANDBOX\" \"$PM_SANDBOX\" || exit 97\n"
         "  while read -r dev mnt rest; do\n"
         "    case \"$mnt\" in\n"
         "      /proc|/proc/*|/sys|/sys/*|/dev|/dev/pts) continue ;;\n"
         "      \"$PM_SANDBOX\"|\"$PM_SANDBOX\"/*) continue ;;\n"
         "    esac\n"
         "    mount -o remount,bind,ro \"$mnt\" 2>/dev/null || [ \"$mnt\" != / ] || exit 97\n"
         "  done < /proc/self/mounts\n"
         "  { : > /.pentamesh_probe; } 2>/dev/null && { rm -f /.pentamesh_probe; exit 97; }\n"
         "  [ \"$mode\" = probe ] && exit 0\n"
         "  if [ -n \"$lower\" ] && [ -d \"$lower\" ]; then\n"
         "    mount -t overlay overlay -o \"lowerdir=$lower,upperdir=$PM_SANDBOX/upper,"
         "workdir=$PM_SANDBOX/overlay\" \"$PM_SANDBOX/work\" 2>/dev/null &&\n"
         "      : > \"$PM_SANDBOX/overlay.mounted\"\n"
         "  fi\n"
         "fi\n"
         "cd \"$PM_SANDBOX/work\" || exit 98\n" +
         bash +
         " \"$script\"\n"
         "rc=$?\n"
         "trap '' TERM\n"
         "kill -TERM 0 2>/dev/null\n"
         "exit $rc\n";
}

core::Status WriteText(const fs::path& path, const std::string& text, bool executable) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return core::Status::Error(fmt::format("cannot write {}", path.string()));
  if (executable) {
    fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  }
  return core::Status::Ok();
}

// The argv that runs `wrapper MODE ...` at an isolation level, in the sandbox's environment.
std::vector<std::string> Command(Isolation level, const std::string& unshare, const fs::path& root,
                                 const std::string& bash, const std::string& mode,
                                 const std::string& script, const std::string& lower) {
  std::vector<std::string> argv;
  if (level != Isolation::kNone) {
    argv = {unshare, "--net"};
    if (level == Isolation::kReadOnly) argv.push_back("--mount");
    if (geteuid() != 0) argv.push_back("--map-root-user");
    argv.push_back("--");
  }
  const std::string env = core::FindOnPath("env");
  argv.insert(argv.end(),
              {env.empty() ? "/usr/bin/env" : env, "-i",
               "PATH=" + (root / "bin").string() + ":/usr/local/bin:/usr/bin:/bin",
               "HOME=" + (root / "home").string(), "TMPDIR=" + (root / "tmp").string(), "LANG=C",
               "PM_SANDBOX=" + root.string(), "PM_RECORD_DIR=" + (root / "records").string(), bash,
               (root / "wrapper.sh").string(), mode, script, lower});
  return argv;
}

// The strongest isolation this host gives, probed once with a sandbox of its own.
Isolation ProbeIsolation(const fs::path& root, const std::string& bash) {
  static std::once_flag once;
  static Isolation level = Isolation::kNone;
  std::call_once(once, [&] {
    const std::string unshare = core::FindOnPath("unshare");
    if (unshare.empty()) return;
    const core::ProcessOptions quiet{.log = (root / "probe.log").string(), .timeout_s = 10};
    if (core::RunProcess(Command(Isolation::kReadOnly, unshare, root, bash, "probe", "", ""), quiet)
            .ok()) {
      level = Isolation::kReadOnly;
    } else if (core::RunProcess(
                   Command(Isolation::kNoNetwork, unshare, root, bash, "plain", "/dev/null", ""),
                   quiet)
                   .ok()) {
      level = Isolation::kNoNetwork;
    }
  });
  return level;
}

// The records, in the order the processes started (file names are start times).
core::Result<std::vector<LaunchRecord>> ReadRecords(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".part") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<LaunchRecord> out;
  for (const fs::path& f : files) {
    PM_ASSIGN_OR_RETURN(const std::string text, spec::ReadFile(f.string()));
    std::vector<std::string> parts;
    size_t start = 0;
    while (start < text.size()) {
      const size_t nul = text.find('\0', start);
      if (nul == std::string::npos) break;
      parts.push_back(text.substr(start, nul - start));
      start = nul + 1;
    }
    if (parts.size() < 2) continue;
    LaunchRecord r;
    r.cwd = parts[0];
    r.argv.assign(parts.begin() + 1, parts.end());
    out.push_back(std::move(r));
  }
  return out;
}

// The last lines of the script's output, for messages.
std::string Tail(const fs::path& log, size_t lines) {
  auto text = spec::ReadFile(log.string());
  if (!text.ok()) return "";
  std::vector<std::string> all;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (line.size() > 160) line = line.substr(0, 160) + "...";
    if (!line.empty()) all.push_back(line);
  }
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += (out.empty() ? "" : " | ") + all[i];
  }
  return out;
}

// The directory (relative, inside the working directory, not yet made) of the file a redirection
// of the script could not open: bash's "SCRIPT: line N: DIR/FILE: No such file or directory" as
// the last line of its output; empty when the script stopped for another reason.
std::string MissingWriteDirectory(const fs::path& log) {
  auto text = spec::ReadFile(log.string());
  if (!text.ok()) return "";
  std::string last;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) last = std::move(line);
  }
  if (last.size() > 4096) return "";  // not bash's message; and std::regex recurses per character
  static const std::regex kNoSuchFile(R"(: line [0-9]+: ([^:]+): No such file or directory$)");
  std::smatch m;
  if (!std::regex_search(last, m, kNoSuchFile)) return "";
  const fs::path dir = fs::path(m[1].str()).lexically_normal().parent_path();
  if (dir.empty() || dir.is_absolute() || dir == "." || dir.string().rfind("..", 0) == 0) return "";
  return dir.string();
}

// Makes `dir` (relative) in the sandbox's working directory (in the overlay's upper layer, which
// holds the working directory's writes, and in work/ for the plain mode); false when it already
// existed there or cannot be made.
bool MakeInWorkingDirectory(const fs::path& root, const std::string& dir) {
  std::error_code ec;
  bool made = false;
  for (const char* sub : {"upper", "work"})
    made = fs::create_directories(root / sub / dir, ec) || made;
  return made;
}

}  // namespace

SandboxDir::~SandboxDir() {
  if (path.empty()) return;
  std::error_code ec;
  // The overlay's work directory is left mode 000 by the kernel (and a script may chmod its
  // own): give every directory back to its owner first, or remove_all stops there as non-root.
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    std::error_code ignored;
    if (it->is_directory(ignored) && !it->is_symlink(ignored)) {
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ignored);
    }
  }
  fs::remove_all(path, ec);
}

const char* ToString(Isolation level) {
  switch (level) {
    case Isolation::kReadOnly:
      return "no network, read-only outside its temporary directory";
    case Isolation::kNoNetwork:
      return "no network; writes outside its temporary directory NOT prevented (no mount "
             "namespace on this host)";
    case Isolation::kNone:
      return "NOT isolated: no network or mount namespace on this host (unshare missing or "
             "refused); only "
             "HOME, TMPDIR and the working directory are temporary";
  }
  return "";
}

core::Result<ScriptRun> RunScriptSandboxed(const std::string& name, const std::string& text,
                                           const std::string& dir, double timeout_s,
                                           bool require_read_only) {
  const std::string bash = core::FindOnPath("bash");
  if (bash.empty()) return core::Status::Error("bash is not on PATH");
  std::string pattern = (fs::temp_directory_path() / "pentamesh-import-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return core::Status::Error(fmt::format("cannot create a temporary directory {}", pattern));
  }
  ScriptRun run;
  run.dir = std::make_shared<SandboxDir>();
  run.dir->path = pattern;
  const fs::path root = pattern;
  std::error_code ec;
  for (const char* sub : {"bin", "home", "tmp", "work", "records", "upper", "overlay", "script"}) {
    fs::create_directories(root / sub, ec);
    if (ec) return core::Status::Error(fmt::format("cannot create {}", (root / sub).string()));
  }
  for (const char* tool : kRecorders) {
    PM_RETURN_IF_ERROR(WriteText(root / "bin" / tool, StandIn(bash, tool), true));
  }
  PM_RETURN_IF_ERROR(WriteText(root / "wrapper.sh", Wrapper(bash), true));
  // The engines' examples run from the checkout's root and check that its entry point is there:
  // empty stand-ins (nothing runs them; python is a recorder).
  for (const char* entry : kEntryPoints) {
    for (const char* sub : {"work", "upper"}) {
      PM_RETURN_IF_ERROR(WriteText(root / sub / entry, "", false));
    }
  }
  // The file itself when name is it (its own directory, as $0 and BASH_SOURCE say), else the text
  // written into the sandbox.
  std::string script;
  {
    auto on_disk = fs::is_regular_file(name, ec)
                       ? spec::ReadFile(name)
                       : core::Result<std::string>(core::Status::Error(""));
    if (on_disk.ok() && *on_disk == text) {
      script = fs::absolute(name, ec).string();
    } else {
      script = (root / "script" / fs::path(name).filename()).string();
      if (fs::path(name).filename().empty()) script = (root / "script" / "script.sh").string();
      PM_RETURN_IF_ERROR(WriteText(script, text, false));
    }
  }
  const std::string lower = fs::absolute(dir.empty() ? "." : dir, ec).lexically_normal().string();
  run.isolation = ProbeIsolation(root, bash);
  if (require_read_only && run.isolation != Isolation::kReadOnly) return run;
  run.ran = true;
  const std::string unshare = core::FindOnPath("unshare");
  const fs::path log = root / "output.log";
  // A script that writes into a directory of its working directory it never creates (the
  // Megatron-DeepSpeed examples' `cat <<EOT > ./tmp/deepspeed.json`, where ./tmp holds the
  // user's data) stops there: that directory is made in the sandbox and the script run again,
  // a few times at most.
  std::vector<std::string> made;
  for (int attempt = 0;; ++attempt) {
    fs::remove_all(root / "records", ec);
    fs::create_directories(root / "records", ec);
    const core::Status st = core::RunProcess(
        Command(run.isolation, unshare, root, bash,
                run.isolation == Isolation::kReadOnly ? "readonly" : "plain", script, lower),
        core::ProcessOptions{.log = log.string(), .timeout_s = timeout_s});
    run.outcome = st.ok() ? "exit status 0" : st.message();
    const std::string missing = st.ok() || attempt >= 4 ? "" : MissingWriteDirectory(log);
    if (missing.empty() || !MakeInWorkingDirectory(root, missing)) break;
    made.push_back(missing);
  }
  const std::string tail = Tail(log, 3);
  if (!tail.empty()) run.outcome += ", last output: " + tail;
  if (!made.empty()) {
    std::string list;
    for (const std::string& d : made) list += (list.empty() ? "" : ", ") + d;
    run.outcome += fmt::format(
        "; made {} in the working directory, where the script writes without creating it", list);
  }
  PM_ASSIGN_OR_RETURN(run.records, ReadRecords(root / "records"));
  // The overlay is gone with the namespace: what the script wrote in it is in upper/.
  if (fs::exists(root / "overlay.mounted", ec)) {
    const std::string work = (root / "work").string(), upper = (root / "upper").string();
    for (LaunchRecord& r : run.records) {
      if (r.cwd == work || r.cwd.rfind(work + "/", 0) == 0)
        r.cwd = upper + r.cwd.substr(work.size());
    }
  }
  return run;
}

namespace {

// The line of the script that names `flag` first (outside comments), 0 when none does (the flag
// was assembled by the script).
int LineOf(const std::string& text, const std::string& flag) {
  size_t pos = 0;
  while ((pos = text.find(flag, pos)) != std::string::npos) {
    const size_t end = pos + flag.size();
    const bool whole =
        end == text.size() || !(std::isalnum(static_cast<unsigned char>(text[end])) ||
                                text[end] == '-' || text[end] == '_');
    const size_t line_start =
        text.rfind('\n', pos) == std::string::npos ? 0 : text.rfind('\n', pos) + 1;
    const size_t first = text.find_first_not_of(" \t", line_start);
    if (whole && (first == std::string::npos || text[first] != '#')) {
      return 1 + static_cast<int>(std::count(text.begin(), text.begin() + pos, '\n'));
    }
    pos = end;
  }
  return 0;
}

}  // namespace

core::Result<Script> EvaluateScript(const std::string& name, const std::string& text,
                                    const std::string& dir, const ImportOptions& options,
                                    Imported& out) {
  if (options.shell == Shell::kBuiltin) return ReadScript(name, text);
  const bool forced = options.shell == Shell::kBash;
  auto run = RunScriptSandboxed(name, text, dir, options.shell_timeout_s, !forced);
  std::string fallback;
  if (!run.ok()) {
    if (forced)
      return core::Status::Error(fmt::format("{}: --shell bash: {}", name, run.status().message()));
    fallback = fmt::format("not run under bash ({})", run.status().message());
  } else if (!run->ran) {
    fallback = fmt::format(
        "not run under bash: this host cannot sandbox it ({}); pass --shell bash to run it anyway",
        ToString(run->isolation));
  } else {
    // The first process that started a training entry point (pretrain_*.py).
    for (const LaunchRecord& r : run->records) {
      if (std::none_of(r.argv.begin(), r.argv.end(), IsEntryWord)) continue;
      Script script;
      int line = 0;
      for (const std::string& a : r.argv) {
        if (a.rfind("--", 0) == 0) line = LineOf(text, a.substr(0, a.find('=')));
        script.words.push_back(Word{a, line, 1});
      }
      script.cwd = r.cwd;
      script.sandbox = run->dir;
      out.notes.push_back(fmt::format(
          "evaluated with bash in a sandbox ({}; {}): read the argv the stand-in '{}' received "
          "(the first of the {} commands recorded that starts a pretrain_*.py)",
          ToString(run->isolation), run->outcome, r.argv[0], run->records.size()));
      return script;
    }
    if (forced) {
      return core::Status::Error(
          fmt::format("{}: under bash the script started no pretrain_*.py ({}; {} commands "
                      "recorded)",
                      name, run->outcome, run->records.size()));
    }
    fallback = fmt::format("bash ran it and started no pretrain_*.py ({})", run->outcome);
  }
  PM_ASSIGN_OR_RETURN(Script script, ReadScript(name, text));
  script.fallback = fallback;
  out.notes.push_back(fmt::format("read with pentamesh's own shell reader: {}", fallback));
  return script;
}

}  // namespace pentamesh::launch::internal

namespace pentamesh::launch {

core::Result<Shell> ParseShell(const std::string& option, const std::string& name) {
  if (name == "auto") return Shell::kAuto;
  if (name == "bash") return Shell::kBash;
  if (name == "builtin") return Shell::kBuiltin;
  return core::Status::Error(fmt::format("{}: '{}' is not auto, bash or builtin", option, name));
}

}  // namespace pentamesh::launch
