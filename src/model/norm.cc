#include "model/norm.h"

#include "kernels/cpu/rmsnorm.h"

namespace pentamesh::model {

RmsNorm::RmsNorm(ParamSet& params, const std::string& name, int64_t hidden, double eps)
    : params_(params), hidden_(hidden), eps_(static_cast<float>(eps)) {
  weight_ = params.Add(name, {hidden}, {}, {.kind = InitKind::kOnes}, /*weight_decay=*/false);
}

void RmsNorm::Forward(Tensor y, Saved& saved, ConstTensor x, const LayerContext& ctx,
                      core::MemTag tag) const {
  const int64_t T = x.numel() / hidden_;
  saved.rstd = NewBuffer(ctx, tag, {T});
  std::vector<float> w = WidenToF32(params_.weight(weight_));
  kernels::rmsnorm_forward(y, saved.rstd.view(), x, ConstTensor(w.data(), {hidden_}), eps_);
  RoundActivation(ctx, y);
}

void RmsNorm::Backward(Tensor dx, ConstTensor dy, ConstTensor x, const Saved& saved) const {
  std::vector<float> w = WidenToF32(params_.weight(weight_));
  kernels::rmsnorm_backward(dx, params_.grad(weight_), dy, x, ConstTensor(w.data(), {hidden_}),
                            saved.rstd.view());
}

}  // namespace pentamesh::model
