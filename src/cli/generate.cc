// `pentamesh generate (--checkpoint PATH | --config run.toml [--resume auto|PATH]) (--prompt TEXT
// | --prompt-ids 1,2,3) --max-new-tokens N [--temperature T --top-k K --top-p P --seed S]
// [--layout "tp=2 ep=2"] [--tokenizer FILE] [--threads N] [--host-profile FILE] [--json]`:
// continues a prompt with a checkpoint's model on the engine (train/generate.h: KV cache, prefill
// then one token per step), alone or as one rank of `mpirun -np tp*ep`, and prints the new tokens
// (ids and text), the prefill latency, the mean per-token decode latency and tokens/s; with
// --host-profile also the inference cost model's prediction of both for this host
// (train::PredictGeneration).
#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/checkpoint_args.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/serve_json.h"
#include "comm/mpi_communicator.h"
#include "data/tokenizer.h"
#include "spec/layout.h"
#include "train/checkpoint_state.h"
#include "train/generate.h"

namespace pentamesh::cli {
namespace {

struct GenerateArgs {
  CheckpointArgs source;
  std::string prompt, prompt_ids, layout, tokenizer;
  bool has_prompt = false;
  int64_t max_new_tokens = 0;
  train::SamplingOptions sampling;
  int threads = 0;
  std::string host_profile;
  bool json = false;
};

// "1,2,3" -> {1, 2, 3}; errors name --prompt-ids.
core::Result<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  size_t begin = 0;
  while (begin <= text.size() && !text.empty()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    int32_t id = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size())
      return core::Status::Error(fmt::format(
          "--prompt-ids: '{}' is not a token id (give comma-separated integers)", item));
    ids.push_back(id);
    begin = end + 1;
  }
  return ids;
}

std::string Sampling(const train::SamplingOptions& s) {
  if (s.temperature <= 0) return "greedy";
  return fmt::format("sampled: temperature {} top-k {} top-p {} seed {}", s.temperature, s.top_k,
                     s.top_p, s.seed);
}

void Print(const GenerateArgs& args, const ckpt::Checkpoint& ck, const train::Generator& g,
           const std::vector<int32_t>& prompt, const train::GenerateResult& r,
           const std::string& text, const std::optional<cost::ServeEstimate>& predicted) {
  if (args.json) {
    nlohmann::json j = {{"checkpoint", ck.dir()},
                        {"step", ck.step()},
                        {"model", g.model().name},
                        {"layout", {{"tp", g.layout().tp}, {"ep", g.layout().ep}}},
                        {"ranks", g.ranks()},
                        {"sampling",
                         {{"temperature", args.sampling.temperature},
                          {"top_k", args.sampling.top_k},
                          {"top_p", args.sampling.top_p},
                          {"seed", args.sampling.seed}}},
                        {"prompt_ids", prompt},
                        {"ids", r.tokens},
                        {"prefill_ms", r.prefill_ms},
                        {"decode_ms_per_token", r.decode_ms_mean},
                        {"decode_tokens_per_s", r.decode_tokens_per_s},
                        {"total_ms", r.total_ms},
                        {"tokens_per_s", r.tokens_per_s},
                        {"kv_cache_bytes", r.kv_cache_bytes},
                        {"kv_cache_tokens", r.kv_cache_tokens}};
    if (!text.empty()) j["text"] = text;
    if (predicted) j["predicted"] = ServeEstimateJson(*predicted);
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("generate: {} (step {}), model {}, layout tp={} ep={} on {} rank(s)\n", ck.dir(),
             ck.step(), g.model().name, g.layout().tp, g.layout().ep, g.ranks());
  fmt::print("prompt: {} tokens; {} new tokens ({})\n", prompt.size(), r.tokens.size(),
             Sampling(args.sampling));
  fmt::print("ids: {}\n", fmt::join(r.tokens, " "));
  if (!text.empty()) fmt::print("text: {}\n", text);
  fmt::print(
      "latency: prefill {:.3f} ms ({} tokens), decode {:.3f} ms/token (mean of {} steps, {:.1f} "
      "tokens/s); {} tokens in {:.3f} ms ({:.1f} tokens/s)\n",
      r.prefill_ms, prompt.size(), r.decode_ms_mean, r.tokens.size() - 1, r.decode_tokens_per_s,
      r.tokens.size(), r.total_ms, r.tokens_per_s);
  fmt::print("kv cache: {} tokens, {:.1f} KiB per rank (allocator tag kv_cache)\n",
             r.kv_cache_tokens, static_cast<double>(r.kv_cache_bytes) / 1024.0);
  if (predicted) {
    const double prefill = predicted->prefill_s * 1e3, decode = predicted->itl_s * 1e3;
    fmt::print(
        "predicted ({}): prefill {:.3f} ms, decode {:.3f} ms/token; measured/predicted {:.2f}, "
        "{:.2f}\n",
        args.host_profile, prefill, decode, r.prefill_ms / prefill,
        r.decode_ms_mean > 0 ? r.decode_ms_mean / decode : 0.0);
  }
}

int RunGenerate(const GenerateArgs& args) {
  if (args.has_prompt == !args.prompt_ids.empty())
    return Fail("--prompt: give exactly one of --prompt TEXT and --prompt-ids 1,2,3");
  auto layout = args.layout.empty() ? core::Result<spec::Layout>(spec::Layout{})
                                    : spec::ParseLayout(args.layout);
  if (!layout.ok()) return Fail(fmt::format("--layout: {}", layout.status().message()));
  auto found = FindCheckpoint(args.source, "generate");
  if (!found.ok()) return Fail(found.status().message());
  const ckpt::Checkpoint& ck = **found;
  auto run = train::RunConfigOfCheckpoint(ck);
  if (!run.ok()) return Fail(run.status().message());
  // The tokenizer: needed to encode --prompt; with --prompt-ids only to print the text.
  std::optional<data::Tokenizer> tokenizer;
  if (auto path = TokenizerPath(args.tokenizer, *run, ""); path.ok()) {
    auto t = data::Tokenizer::Load(*path);
    if (!t.ok()) return Fail(fmt::format("--tokenizer: {}", t.status().message()));
    tokenizer = std::move(*t);
  } else if (args.has_prompt) {
    return Fail(path.status().message());
  }
  std::vector<int32_t> prompt;
  if (args.has_prompt) {
    for (int id : tokenizer->Encode(args.prompt)) prompt.push_back(id);
    if (prompt.empty())
      return Fail(fmt::format("--prompt: '{}' encodes to no tokens", args.prompt));
  } else {
    auto ids = ParseIds(args.prompt_ids);
    if (!ids.ok()) return Fail(ids.status().message());
    prompt = std::move(*ids);
  }
  std::optional<train::HostProfile> host;
  if (!args.host_profile.empty()) {
    auto h = train::LoadHostProfile(args.host_profile);
    if (!h.ok()) return Fail(fmt::format("--host-profile: {}", h.status().message()));
    host = std::move(*h);
  }
  // The layout's rules before MPI starts (the rank count is checked once the world exists).
  if (auto bad =
          train::GenerateLayoutViolations(run->model, *layout, static_cast<int>(layout->gpus()));
      !bad.empty())
    return Fail(fmt::format("{}", fmt::join(bad, "\n")));
  std::unique_ptr<comm::MpiWorld> world;
  if (UnderLauncher() || layout->gpus() > 1) {
    auto w = comm::MpiWorld::Create();
    if (!w.ok()) return Fail(w.status().message());
    world = std::move(*w);
  }
  auto generator = train::Generator::FromCheckpoint(ck, *layout, world.get());
  if (!generator.ok()) return Fail(generator.status().message());
  train::Generator& g = **generator;
  if (g.rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr)
    return Fail("cannot silence stdout");
  auto result = g.Generate({.prompt = prompt,
                            .max_new_tokens = args.max_new_tokens,
                            .sampling = args.sampling,
                            .keep_logits = false,
                            .threads = args.threads});
  if (!result.ok()) return Fail(result.status().message());
  std::string text;
  if (tokenizer) {
    auto decoded =
        tokenizer->Decode(std::vector<int>(result->tokens.begin(), result->tokens.end()));
    if (decoded.ok()) text = *decoded;
  }
  std::optional<cost::ServeEstimate> predicted;
  if (host) {
    train::UseHostProfile(run->run, *host);
    run->run.threads = args.threads;
    predicted = train::PredictGeneration(*run, *layout, static_cast<int64_t>(prompt.size()),
                                         args.max_new_tokens);
  }
  Print(args, ck, g, prompt, *result, text, predicted);
  return 0;
}

}  // namespace

RunFn AddGenerateCommand(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "generate", "Continue a prompt with a checkpoint's model (KV cache; greedy or sampled)");
  auto args = std::make_shared<GenerateArgs>();
  AddCheckpointOptions(sub, &args->source);
  sub->add_option("--prompt", args->prompt, "prompt text (encoded with the run's tokenizer)");
  sub->add_option("--prompt-ids", args->prompt_ids, "prompt token ids, comma separated");
  sub->add_option("--max-new-tokens", args->max_new_tokens, "tokens to generate")
      ->required()
      ->transform(IntIn(1));
  sub->add_option("--temperature", args->sampling.temperature, "0 (default): greedy")
      ->check(NumberIn(0));
  sub->add_option("--top-k", args->sampling.top_k, "sample among the k most likely (0: all)")
      ->transform(IntIn(0));
  sub->add_option("--top-p", args->sampling.top_p,
                  "then among the most likely tokens holding probability p (1: all)")
      ->check(NumberIn(0, 1));
  sub->add_option("--seed", args->sampling.seed, "seed of the sampled draws");
  sub->add_option("--layout", args->layout,
                  "tp and ep degrees, e.g. \"tp=2 ep=2\" (run under mpirun -np tp*ep)");
  sub->add_option("--tokenizer", args->tokenizer,
                  "SentencePiece .model (default: the tokenizer of the run's data.dataset)");
  sub->add_option("--threads", args->threads, "BLAS threads per rank (0: OpenBLAS's default)")
      ->transform(IntIn(0, 1024));
  sub->add_option("--host-profile", args->host_profile,
                  "`pentamesh calibrate --host` output: print the cost model's prefill and decode "
                  "for this host next to the measured ones");
  sub->add_flag("--json", args->json, "print JSON");
  return [args, sub]() {
    args->has_prompt = sub->count("--prompt") > 0;
    return RunGenerate(*args);
  };
}

}  // namespace pentamesh::cli
