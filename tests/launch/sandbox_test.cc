// import-config evaluating launch scripts with bash in a sandbox (src/launch/sandbox.cc): the
// idioms of the engines' published examples, each in a small script written for these tests
// (tests/launch/data; the engines' text stays out of the repository), read as bash reads them;
// and the sandbox holding a script that tries to write outside it or reach the network.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/find_on_path.h"
#include "launch/internal.h"
#include "launch/launch.h"
#include "spec/layout.h"

namespace pentamesh::launch {
namespace {

namespace fs = std::filesystem;

fs::path Data(const std::string& name) {
  return fs::path(PM_SOURCE_DIR) / "tests" / "launch" / "data" / name;
}

bool Noted(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& l : lines) {
    if (l.find(part) != std::string::npos) return true;
  }
  return false;
}

// The isolation bash runs under on this host (the tests of the read-only sandbox skip, saying
// so, where it is weaker).
internal::Isolation HostIsolation() {
  auto run = internal::RunScriptSandboxed("probe.sh", "true\n", ".", 10, false);
  return run.ok() ? run->isolation : internal::Isolation::kNone;
}

#define SKIP_WITHOUT_SANDBOX()                                                                     \
  if (core::FindOnPath("bash").empty() || HostIsolation() != internal::Isolation::kReadOnly) {     \
    GTEST_SKIP() << "no bash or no read-only sandbox on this host (unshare --mount --net failed)"; \
  }

ImportOptions Bash() {
  ImportOptions o;
  o.shell = Shell::kBash;
  return o;
}

// Self-appending arrays, `if` blocks and `$((...))`: the builtin reader keeps the arithmetic as
// text and refuses; bash gives pp = 8 / 2 / 2 and the global batch 8 x 4.
TEST(LaunchBash, ArraysIfBlocksArithmetic) {
  SKIP_WITHOUT_SANDBOX();
  const fs::path file = Data("arrays_if_arith.sh");
  auto im = ImportConfig(file.string(), ImportOptions{});  // auto: bash on this host
  ASSERT_TRUE(im.ok()) << im.status().message();
  EXPECT_EQ(im->engine, Engine::kMegatron);
  EXPECT_EQ(im->gpus, 8);
  EXPECT_EQ(im->model.layers, 8);
  EXPECT_EQ(im->model.hidden, 512);
  EXPECT_EQ(im->train.seq_len, 2048);
  EXPECT_EQ(im->train.global_batch_tokens, 32 * 2048);
  EXPECT_EQ(spec::FormatLayout(im->layout),
            "dp=2 tp=2 pp=2 cp=1 ep=1 zero=1 mbs=2 recompute=none schedule=1f1b cp_kind=ring "
            "ep_placement=separate sp=on");
  EXPECT_TRUE(Noted(im->notes, "evaluated with bash in a sandbox (no network, read-only"));
  EXPECT_TRUE(Noted(im->notes, "read the argv the stand-in 'torchrun'"));
  ImportOptions builtin;
  builtin.shell = Shell::kBuiltin;
  auto old = ImportConfig(file.string(), builtin);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("$((WORLD_SIZE / TP / 2))"), std::string::npos)
      << old.status().message();
}

// Flags in strings, extended in an `if`, run through `eval` unquoted; the ds_config written by a
// heredoc into the sandbox and read from there (batch 64 = micro 2 x gas 8 x dp 4).
TEST(LaunchBash, EvalUnquotedStringsHeredocDsConfig) {
  SKIP_WITHOUT_SANDBOX();
  const fs::path file = Data("eval_strings_heredoc.sh");
  auto im = ImportConfig(file.string(), ImportOptions{});
  ASSERT_TRUE(im.ok()) << im.status().message();
  EXPECT_EQ(im->engine, Engine::kDeepSpeed);
  EXPECT_EQ(im->gpus, 8);
  EXPECT_EQ(im->model.layers, 6);
  EXPECT_EQ(im->model.hidden, 768);
  EXPECT_EQ(im->train.global_batch_tokens, 64 * 1024);
  EXPECT_EQ(im->train.precision, spec::Precision::kBf16);  // the heredoc's bf16.enabled
  EXPECT_EQ(spec::FormatLayout(im->layout),
            "dp=4 tp=2 pp=1 cp=1 ep=1 zero=1 mbs=2 recompute=none schedule=1f1b cp_kind=ring "
            "ep_placement=separate sp=off");
  EXPECT_TRUE(Noted(im->notes, "read the argv the stand-in 'deepspeed'"));
  // Nothing of the run is left behind: the heredoc landed in the sandbox, not beside the script.
  EXPECT_FALSE(fs::exists(Data("ds_config_gbs64_zero1.json")));
  EXPECT_FALSE(fs::exists(Data("train.log")));
  // --gpus the ds_config's batch triple contradicts (dp 4 x tp 2 is 8) is named, not ignored.
  ImportOptions sixteen;
  sixteen.gpus = 16;
  auto bad = ImportConfig(file.string(), sixteen);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("data-parallel degree 4"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("is not the world size 16 (from --gpus)"),
            std::string::npos)
      << bad.status().message();
  // The builtin reader sees one quoted string and no model.
  ImportOptions builtin;
  builtin.shell = Shell::kBuiltin;
  EXPECT_FALSE(ImportConfig(file.string(), builtin).ok());
}

// A heredoc into a directory the script never makes (Megatron-DeepSpeed's llama2 example writes
// ./tmp/deepspeed.json under `set -e`): the directory is made in the sandbox and the script run
// again, with a note; the world comes from torchrun's flags (the ds_config has no
// gradient_accumulation_steps); a SentencePiece tokenizer's vocabulary is --model's alone.
TEST(LaunchBash, HeredocIntoADirectoryTheScriptNeverMakes) {
  SKIP_WITHOUT_SANDBOX();
  const fs::path file = Data("heredoc_into_subdir.sh");
  auto no_model = ImportConfig(file.string(), Bash());
  ASSERT_FALSE(no_model.ok());
  EXPECT_NE(no_model.status().message().find(
                "the vocabulary of --tokenizer-type GPTSentencePieceTokenizer is not known"),
            std::string::npos)
      << no_model.status().message();
  ImportOptions o = Bash();
  o.model = "llama2-7b";
  auto im = ImportConfig(file.string(), o);
  ASSERT_TRUE(im.ok()) << im.status().message();
  EXPECT_EQ(im->engine, Engine::kDeepSpeed);
  EXPECT_EQ(im->gpus, 4);
  EXPECT_EQ(im->model.layers, 4);  // the file's shape, not llama2-7b's
  EXPECT_EQ(im->model.hidden, 512);
  EXPECT_EQ(im->model.kv_heads, 4);
  EXPECT_EQ(im->model.vocab, 32000);  // llama2-7b's (a multiple of 128 x tp 2 already)
  EXPECT_EQ(im->train.precision, spec::Precision::kBf16);
  EXPECT_EQ(im->train.global_batch_tokens, 16 * 1024);
  EXPECT_EQ(spec::FormatLayout(im->layout),
            "dp=2 tp=2 pp=1 cp=1 ep=1 zero=1 mbs=2 recompute=none schedule=1f1b cp_kind=ring "
            "ep_placement=separate sp=off");
  EXPECT_TRUE(Noted(im->notes, "made run in the working directory"));
  EXPECT_TRUE(Noted(im->notes, "vocabulary 32000 from --model llama2-7b"));
  EXPECT_FALSE(fs::exists(Data("run")));  // made in the sandbox only
  // A world the ds_config's batch contradicts is named with both sources.
  ImportOptions wrong = o;
  wrong.gpus = 16;
  auto bad = ImportConfig(file.string(), wrong);
  ASSERT_TRUE(bad.ok()) << bad.status().message();  // no gradient_accumulation_steps: dp = 8
  EXPECT_EQ(bad->layout.dp, 8);
  wrong.gpus = 5;
  auto odd = ImportConfig(file.string(), wrong);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("world size 5 (from --gpus) is not a multiple of tp x pp "
                                        "x cp = 2"),
            std::string::npos)
      << odd.status().message();
}

// srun's flags (--container-image, --ntasks-per-node, -l) and bash -x -c are not Megatron's:
// the stand-in srun runs what it wraps and the python stand-in records the training command.
TEST(LaunchBash, SrunWrapsTheCommand) {
  SKIP_WITHOUT_SANDBOX();
  auto im = ImportConfig(Data("srun_wraps.sh").string(), Bash());
  ASSERT_TRUE(im.ok()) << im.status().message();
  EXPECT_TRUE(im->warnings.empty());
  EXPECT_EQ(im->gpus, 8);  // #SBATCH --nodes 2 x --ntasks-per-node 4
  EXPECT_EQ(im->layout.tp, 4);
  EXPECT_EQ(im->layout.dp, 2);
  EXPECT_EQ(im->train.global_batch_tokens, 8 * 512);
  EXPECT_TRUE(Noted(im->notes, "read the argv the stand-in 'python'"));
}

// A misspelt flag appended in an `if` block is reported by name with the line that writes it and
// the flag meant; --allow-unknown imports without it and lists it.
TEST(LaunchBash, MisspeltFlagIsReported) {
  SKIP_WITHOUT_SANDBOX();
  const fs::path file = Data("misspelt_flag.sh");
  auto bad = ImportConfig(file.string(), Bash());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 10: --tensor-model-paralel-size (did you mean "
                                        "--tensor-model-parallel-size?)"),
            std::string::npos)
      << bad.status().message();
  ImportOptions o = Bash();
  o.allow_unknown = true;
  auto warned = ImportConfig(file.string(), o);
  ASSERT_TRUE(warned.ok()) << warned.status().message();
  EXPECT_EQ(warned->layout.tp, 1);
  ASSERT_EQ(warned->warnings.size(), 1u);
  EXPECT_NE(warned->warnings[0].find("--tensor-model-paralel-size"), std::string::npos);
}

// A bare list of flags (no command) starts nothing under bash: auto falls back to the builtin
// reader and says so; --shell bash refuses, saying what bash did.
TEST(LaunchBash, BareFlagListFallsBack) {
  SKIP_WITHOUT_SANDBOX();
  const std::string flags =
      "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --ffn-hidden-size 512 "
      "--vocab-size 1024 --seq-length 1024 --micro-batch-size 1 --global-batch-size 8\n";
  ImportOptions o;
  o.engine = Engine::kMegatron;
  o.gpus = 8;
  auto im = ImportText("flags.txt", flags, ".", o);
  ASSERT_TRUE(im.ok()) << im.status().message();
  EXPECT_EQ(im->layout.dp, 8);
  EXPECT_TRUE(Noted(im->notes,
                    "read with pentamesh's own shell reader: bash ran it and started "
                    "no pretrain_*.py"));
  o.shell = Shell::kBash;
  auto forced = ImportText("flags.txt", flags, ".", o);
  ASSERT_FALSE(forced.ok());
  EXPECT_NE(forced.status().message().find("started no pretrain_*.py (exit status 127"),
            std::string::npos)
      << forced.status().message();
}

// A script that deletes and writes files outside its sandbox, writes to $HOME, connects to a
// port on this host and outlives its time limit does no harm: the canary stays, nothing appears,
// no connection arrives, and the run ends at the limit.
TEST(LaunchBash, SandboxHoldsTheScript) {
  SKIP_WITHOUT_SANDBOX();
  const fs::path dir = fs::path(::testing::TempDir()) / "pentamesh_sandbox_harm";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path canary = dir / "canary";
  std::ofstream(canary) << "still here\n";
  const int server = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(server, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(server, 4), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  const std::string home_marker = "pentamesh_sandbox_test_" + std::to_string(getpid());
  const std::string script =
      "rm -f '" + canary.string() + "'\n" + "echo x > '" + (dir / "written").string() + "'\n" +
      "touch \"$HOME/" + home_marker + "\"\n" + "echo hi > /dev/tcp/127.0.0.1/" +
      std::to_string(port) + "\n" +
      "python pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 "
      "--ffn-hidden-size 512 --vocab-size 1024 --seq-length 1024 --micro-batch-size 1\n";
  ImportOptions o = Bash();
  o.gpus = 8;
  auto im = ImportText((dir / "harm.sh").string(), script, dir.string(), o);
  ASSERT_TRUE(im.ok()) << im.status().message();
  EXPECT_EQ(im->layout.dp, 8);  // it ran to the launch
  EXPECT_TRUE(fs::exists(canary));
  EXPECT_FALSE(fs::exists(dir / "written"));
  if (const char* home = std::getenv("HOME")) {
    EXPECT_FALSE(fs::exists(fs::path(home) / home_marker));
  }
  fcntl(server, F_SETFL, O_NONBLOCK);
  EXPECT_LT(accept(server, nullptr, nullptr), 0) << "the script reached 127.0.0.1:" << port;
  close(server);
  // A script that never ends is stopped at the time limit (its process group killed).
  o.shell_timeout_s = 1;
  o.engine = Engine::kMegatron;
  const auto start = std::chrono::steady_clock::now();
  auto slow = ImportText((dir / "slow.sh").string(), "sleep 300 & sleep 300\n", dir.string(), o);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(slow.ok());
  EXPECT_NE(slow.status().message().find("killed after the time limit of 1 s"), std::string::npos)
      << slow.status().message();
  EXPECT_LT(took, 10);
  fs::remove_all(dir);
}

// Both engines' pretrain_gpt.py default the tokenizer to GPT-2's BPE (args_defaults), so a
// script without --vocab-size or --tokenizer-type trains with 50,257 tokens (padded to 128 x tp);
// Megatron-DeepSpeed's per-layer --num-experts list (PR-MoE's pyramid) is refused by name.
TEST(LaunchImport, Gpt2TokenizerDefaultAndPyramidRefused) {
  ImportOptions o;
  o.shell = Shell::kBuiltin;  // the flag readers, whichever shell reader
  o.gpus = 8;
  const std::string head =
      "python pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 "
      "--seq-length 1024 --micro-batch-size 1 --tensor-model-parallel-size 2";
  auto im = ImportText("train.sh", head + "\n", ".", o);
  ASSERT_TRUE(im.ok()) << im.status().message();
  EXPECT_EQ(im->model.vocab, 50432);  // 50257 padded to a multiple of 128 x 2
  EXPECT_TRUE(Noted(im->notes, "vocabulary 50257 from --tokenizer-type GPT2BPETokenizer"));
  o.engine = Engine::kDeepSpeed;
  auto pyramid =
      ImportText("launch.sh",
                 head + " --num-experts 32 32 64 --deepspeed --deepspeed_config ds.json\n", ".", o);
  ASSERT_FALSE(pyramid.ok());
  EXPECT_NE(pyramid.status().message().find("--num-experts gives 3 per-layer expert counts, not "
                                            "all equal (a pyramid MoE)"),
            std::string::npos)
      << pyramid.status().message();
}

}  // namespace
}  // namespace pentamesh::launch
