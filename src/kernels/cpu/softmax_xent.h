// Softmax cross-entropy over the vocabulary: forward keeps only the log-sum-exp per row, backward
// recomputes the softmax from it. T = tokens, V = vocab. Targets < 0 are ignored (padding): they
// add no loss and get zero grad. Forward returns the unnormalised sum; the caller normalises by
// the GLOBAL valid tokens of the step (backward's `scale`), so micro-batches and data-parallel
// ranks sum to the same loss as one big batch.
#pragma once

#include "core/tensor.h"

namespace pentamesh::kernels {

using core::ConstTensor;
using core::Tensor;

// lse (T) = logsumexp(logits) per row.  Returns sum over valid rows of (lse - logit[target]).
double softmax_xent_forward(Tensor lse, ConstTensor logits, ConstTensor targets);
// dlogits (T, V) = (softmax - onehot(target)) * scale; rows with target < 0 are zero.
// dlogits may alias logits.
void softmax_xent_backward(Tensor dlogits, ConstTensor logits, ConstTensor lse, ConstTensor targets,
                           float scale);

}  // namespace pentamesh::kernels
