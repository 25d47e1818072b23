// Packing and sampling: the deterministic global order of training sequences, and each rank's
// slice of it.
//
// Packing. A split is one token stream (documents each followed by eos_id). Window w covers
// stream tokens [w*seq_len, w*seq_len + seq_len + 1): inputs are its first seq_len tokens, targets
// its last seq_len (inputs shifted by one). Windows per epoch W = (tokens - 1) / seq_len; the
// final partial window is dropped. Sequences cross document boundaries; the EOS between documents
// is an ordinary token (the model learns to predict it, and what follows it).
//
// Global order. Global sequence g (g = 0, 1, 2, ...) is window Permute_e(g mod W) of epoch
// e = g / W, where Permute_e is a keyed bijection of [0, W) (a Feistel network with cycle
// walking, keyed by (seed, e)); with shuffle = false it is the identity. It is counter-based:
// window(g) is a pure function of (seed, g, W), with no state and no dependence on the ranks.
//
// Data parallelism. Global batch b is sequences [b*G, (b+1)*G), G = global_batch_seqs. dp rank r
// of D gets the contiguous block [b*G + r*G/D, b*G + (r+1)*G/D). Concatenating the slices of
// ranks 0..D-1 gives exactly the dp = 1 batch, for ANY D dividing G: this is why a multi-rank
// run sees the same data as a single process.
//
// Context parallelism (optional, cp_size > 1). Each sequence is cut into 2*cp chunks of
// seq_len/(2*cp) tokens; cp rank i keeps chunks i and 2*cp-1-i (load-balanced causal attention)
// in that order, and Batch::positions gives their global positions for RoPE.
//
// State. SamplerState.next_sequence is the global index of the next unseen sequence: it does not
// depend on dp or cp, so a checkpoint taken at dp = 2 resumes at dp = 4 with exactly the next
// unseen sequence of the global order.
//
// Thread safety: a Sampler is not thread-safe; each rank owns one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/dataset.h"

namespace pentamesh::data {

struct SamplerOptions {
  Split split = Split::kTrain;
  int64_t seq_len = 0;            // tokens per sequence (inputs), > 0
  int64_t global_batch_seqs = 0;  // sequences per global batch (all dp ranks), > 0
  uint64_t seed = 0;              // keys the shuffle
  bool shuffle = true;            // false: windows in stream order (e.g. for eval)
  int dp_rank = 0;
  int dp_size = 1;  // REQUIRES: global_batch_seqs % dp_size == 0
  int cp_rank = 0;
  int cp_size = 1;  // REQUIRES: seq_len % (2 * cp_size) == 0 when cp_size > 1
};

// Position in the global order; small, rank-independent, saved in checkpoints.
struct SamplerState {
  uint64_t next_sequence = 0;  // global index of the next unseen sequence
  // Identity of the order, checked on restore so a resume cannot silently change the data.
  uint64_t seed = 0;
  int64_t seq_len = 0;
  uint64_t windows_per_epoch = 0;
  bool shuffle = true;
  std::string split = "train";
  uint64_t data_fingerprint = 0;  // Dataset::fingerprint(split): same windows, same tokens
};
std::string SamplerStateToJson(const SamplerState& state);
core::Result<SamplerState> SamplerStateFromJson(const std::string& text);

// One rank's slice of one global batch. Row-major [local_batch_seqs, local_seq_len] int32.
struct Batch {
  int64_t global_batch_index = 0;  // b
  int64_t first_sequence = 0;      // global index of this rank's first row
  int64_t local_batch_seqs = 0;    // G / dp_size
  int64_t local_seq_len = 0;       // seq_len / cp_size
  std::vector<int32_t> tokens;     // inputs  [local_batch_seqs, local_seq_len]
  std::vector<int32_t> targets;    // targets [local_batch_seqs, local_seq_len]; all are valid
  std::vector<int32_t> positions;  // [local_seq_len] global positions (0..seq_len-1 without cp)
};

// Window index (within the split's stream) of global sequence g: the pure order function.
// REQUIRES: windows_per_epoch > 0.
uint64_t GlobalWindow(uint64_t seed, bool shuffle, uint64_t windows_per_epoch, uint64_t g);

class Sampler {
 public:
  // Validates options against the dataset (names the offending field). The dataset must outlive
  // the sampler.
  static core::Result<Sampler> Create(const Dataset& dataset, SamplerOptions options);

  // The next global batch's slice for this rank; advances the state by global_batch_seqs.
  Batch Next();
  // Same, reusing `out`'s buffers (no allocation after the first call).
  void NextInto(Batch& out);

  const SamplerOptions& options() const { return options_; }
  uint64_t windows_per_epoch() const { return windows_per_epoch_; }
  int64_t local_batch_seqs() const { return options_.global_batch_seqs / options_.dp_size; }
  // Epochs completed so far (fractional), for logging.
  double epoch() const;

  SamplerState state() const;
  // Continues from state.next_sequence. Errors if the state's seed/seq_len/split/shuffle,
  // windows_per_epoch or data_fingerprint (i.e. the dataset) differ from this sampler's; dp, cp
  // and global_batch_seqs may differ freely.
  core::Status Restore(const SamplerState& state);

 private:
  Sampler(const Dataset& dataset, SamplerOptions options, uint64_t windows_per_epoch);
  void ReadSequence(uint64_t g, int32_t* row_tokens, int32_t* row_targets);

  const Dataset* dataset_;
  SamplerOptions options_;
  uint64_t windows_per_epoch_;
  uint64_t next_sequence_ = 0;
  std::vector<int32_t> window_;  // seq_len + 1 tokens, scratch
};

}  // namespace pentamesh::data
