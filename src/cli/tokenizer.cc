// `pentamesh tokenizer train` and `pentamesh tokenize`: train a SentencePiece BPE tokenizer, and
// turn text files into train/heldout token shards (docs/data_format.md).
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "data/dataset.h"
#include "data/tokenize.h"
#include "data/tokenizer.h"

namespace pentamesh::cli {

RunFn AddTokenizerCommand(CLI::App& app) {
  auto* sub = app.add_subcommand("tokenizer", "Train a SentencePiece BPE tokenizer");
  sub->require_subcommand(1);
  auto* train = sub->add_subcommand("train", "Train a BPE tokenizer on text files (streamed)");
  auto o = std::make_shared<data::TokenizerTrainOptions>();
  train->add_option("--input", o->inputs, "text files (or .xz), one paragraph per line")
      ->required()
      ->expected(1, -1);
  train->add_option("--vocab-size", o->vocab_size, "vocabulary size")->required();
  train->add_option("--model-prefix", o->model_prefix, "writes PREFIX.model and PREFIX.vocab")
      ->required();
  train
      ->add_option("--max-sentence-length", o->max_sentence_length,
                   "bytes; longer lines are split at spaces, never dropped")
      ->capture_default_str();
  train->add_option("--threads", o->num_threads, "trainer threads")->capture_default_str();
  train
      ->add_option("--input-sentence-size", o->input_sentence_size,
                   "train on a random sample of this many lines (0 = all)")
      ->capture_default_str();
  train->add_option("--character-coverage", o->character_coverage)->capture_default_str();
  train->add_option("--normalization", o->normalization, "identity or nmt_nfkc")
      ->capture_default_str();
  train->add_option("--seed", o->seed, "seed of SentencePiece's sampling")->capture_default_str();
  train->add_flag("--verbose", o->verbose, "show SentencePiece's training log");
  return [o]() -> int {
    auto stats = data::TrainTokenizer(*o);
    if (!stats.ok()) return Fail(stats.status().message());
    fmt::print(
        "tokenizer: {}.model, vocab {}; {} lines ({} split at {} bytes), {:.1f} MB in {:.1f} s\n",
        o->model_prefix, o->vocab_size, stats->lines, stats->lines_split, o->max_sentence_length,
        static_cast<double>(stats->bytes) / 1e6, stats->seconds);
    return 0;
  };
}

RunFn AddTokenizeCommand(CLI::App& app) {
  auto* sub = app.add_subcommand("tokenize", "Tokenize text files into train/heldout shards");
  auto o = std::make_shared<data::TokenizeOptions>();
  sub->add_option("--model", o->model_path, "SentencePiece .model")->required();
  sub->add_option("--input", o->inputs, "text files (or .xz); an empty line ends a document")
      ->required()
      ->expected(1, -1);
  sub->add_option("--output", o->output_dir, "output directory (manifest.json + shards)")
      ->required();
  sub->add_option("--heldout-fraction", o->heldout_fraction, "fraction of lines held out")
      ->capture_default_str();
  sub->add_option("--split-seed", o->split_seed, "seed of the line-level split")
      ->capture_default_str();
  sub->add_option("--shard-tokens", o->shard_tokens, "tokens per shard file")
      ->capture_default_str();
  sub->add_option("--threads", o->num_threads, "encode threads (output does not depend on it)")
      ->capture_default_str();
  return [o]() -> int {
    auto stats = data::TokenizeCorpus(*o);
    if (!stats.ok()) return Fail(stats.status().message());
    const double tokens = static_cast<double>(stats->train_tokens + stats->heldout_tokens);
    fmt::print(
        "tokenize: {} documents, {} lines, {:.1f} MB -> train {} tokens, heldout {} tokens, {} "
        "shards in {}; {:.2f} s, {:.0f} tokens/s\n",
        stats->documents, stats->lines, static_cast<double>(stats->bytes) / 1e6,
        stats->train_tokens, stats->heldout_tokens, stats->shards, o->output_dir, stats->seconds,
        tokens / std::max(stats->seconds, 1e-9));
    auto dataset = data::Dataset::Open(o->output_dir);
    if (!dataset.ok()) return Fail(dataset.status().message());
    const data::UnigramStats u = data::ComputeUnigramStats(*dataset);
    fmt::print(
        "unigram baseline: train entropy {:.4f} nats/token, heldout cross-entropy {:.4f} "
        "nats/token\n",
        u.train_entropy_nats, u.heldout_cross_entropy_nats);
    return 0;
  };
}

}  // namespace pentamesh::cli
