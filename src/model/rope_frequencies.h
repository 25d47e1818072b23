// RoPE's inverse frequencies for the engine's attention, with a model's rope_scaling applied:
//   none     theta^(-2i/D)                       (kernels::RopeDefaultInverseFrequencies)
//   base     the same with the scaling's theta   (a plain base change, ABF)
//   llama3   Llama 3.1's frequency-dependent interpolation (the released config.json's
//            rope_type "llama3"): with L = original_max_positions, wavelength w_i = 2 pi / f_i,
//            w_i < L / high_freq_factor keeps f_i; w_i > L / low_freq_factor takes f_i / factor;
//            between, (1 - s) f_i / factor + s f_i with s = (L / w_i - low) / (high - low).
// The theta is the scaling's when it sets one, else the model's rope_theta. YaRN is refused by
// model::CheckSupported (the engine does not implement its attention factor).
#pragma once

#include <vector>

#include "spec/model_spec.h"

namespace pentamesh::model {

// REQUIRES: head_dim even; rope.kind != kYarn (model::CheckSupported).
std::vector<double> RopeInverseFrequencies(int64_t head_dim, double rope_theta,
                                           const spec::RopeScaling& rope);

}  // namespace pentamesh::model
