// One decoder layer: h = x + Attention(RMSNorm(x)); out = h + FFN(RMSNorm(h)), FFN = SwiGLU MLP
// or MoE. Recomputation is per layer:
//   none      saves everything backward needs (attention q/k/v/o/lse, norms, FFN internals);
//   selective saves all but the attention internals, which Backward recomputes from RMSNorm(x);
//   full      saves only the layer input x; Backward reruns Forward, then runs backward.
// Sequence parallel (attention.shard.sequence_parallel): x, out, dx, dy and the stashed x, n1, h,
// n2 hold this rank's T/tp rows; attention and FFN gather and scatter at their ends (regions.h).
// Invariant: Backward consumes the Saved of the same micro-batch exactly once.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "model/attention.h"
#include "model/mlp.h"
#include "model/moe.h"
#include "model/norm.h"
#include "spec/layout.h"

namespace pentamesh::model {

struct BlockConfig {
  AttentionConfig attention;
  bool moe = false;
  int64_t ffn_hidden = 0;  // dense FFN
  MoeConfig moe_config;    // when moe
  double norm_eps = 1e-5;
  spec::Recompute recompute = spec::Recompute::kNone;
};

class Block {
 public:
  struct Saved {
    core::Buffer x;  // (T, H) layer input: the only thing kept under full recompute
    RmsNorm::Saved norm1;
    core::Buffer n1;  // (T, H)
    Attention::Saved attention;
    core::Buffer h;  // (T, H) after the attention residual
    RmsNorm::Saved norm2;
    core::Buffer n2;  // (T, H)
    Mlp::Saved mlp;
    Moe::Saved moe;
    // The stash buffers whose values are bf16-rounded activations (not rstd, lse or probs).
    template <typename Fn>
    void ForEachActivation(Fn fn) {
      for (core::Buffer* b : {&x, &n1, &h, &n2, &attention.q, &attention.k, &attention.v,
                              &attention.o, &mlp.h1, &mlp.h3, &mlp.g, &moe.h1, &moe.h3, &moe.g,
                              &moe.out, &moe.shared.h1, &moe.shared.h3, &moe.shared.g}) {
        fn(*b);
      }
    }
  };

  Block(ParamSet& params, int64_t layer, const BlockConfig& config);
  // out (T, H) from x (T, H) (T/tp rows each under SP); out may not alias x.
  void Forward(Tensor out, Saved& saved, ConstTensor x, Dims dims, const LayerContext& ctx,
               MoeStats* stats) const;
  // dx (T, H) is written.
  void Backward(Tensor dx, ConstTensor dy, Saved& saved, Dims dims, const LayerContext& ctx) const;
  // Generation: out (N, H) from the N new tokens' x (N, H) of one sequence at positions pos0 ..,
  // with the attention reading and extending this layer's KV cache (Attention::ForwardCached).
  // Nothing is stashed (every buffer is transient, tag kOther). REQUIRES: sp=off, cp=1.
  void ForwardCached(Tensor out, ConstTensor x, Tensor k_cache, Tensor v_cache, int64_t pos0,
                     const LayerContext& ctx) const;
  Moe* moe() { return moe_.get(); }  // null for a dense FFN
  // The two RMSNorm weights (replicated over tp).
  std::array<ParamId, 2> norm_weights() const { return {norm1_.weight(), norm2_.weight()}; }

 private:
  // Forward keeping everything (policy none or selective) into `s`, x already copied in s.x.
  void ForwardKeep(Tensor out, Saved& s, Dims dims, const LayerContext& ctx, MoeStats* stats,
                   bool keep_attention) const;
  BlockConfig config_;
  RmsNorm norm1_, norm2_;
  Attention attention_;
  std::unique_ptr<Mlp> mlp_;
  std::unique_ptr<Moe> moe_;
};

}  // namespace pentamesh::model
