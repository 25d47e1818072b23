// The whole model against the PyTorch oracle (tests/golden/oracle.py, float64 autograd) on
// identical weights and tokens: loss, logits and every parameter gradient, fp32 engine, relative
// error <= 1e-5 (norm-wise per tensor). Dense (untied, GQA) and MoE (dropless, shared expert,
// tied embeddings, aux + z losses). Skips only when /usr/bin/python3 cannot import torch.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/stage.h"
#include "testing/tiny_model.h"

namespace pentamesh::model {
namespace {

namespace fs = std::filesystem;

bool TorchAvailable() {
  return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
}

template <typename T>
void WriteBin(const fs::path& path, const T* data, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(T)));
}

std::vector<double> ReadDoubles(const fs::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const auto size = static_cast<size_t>(in.tellg());
  std::vector<double> v(size / sizeof(double));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(size));
  return v;
}

double RelError(const float* a, const double* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

void CompareWithOracle(const spec::ModelSpec& spec, double aux_coef, double z_coef) {
  if (!TorchAvailable()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  core::Allocator alloc;
  Model model({.model = spec, .aux_loss_coef = aux_coef, .z_loss_coef = z_coef}, alloc);
  ParamSet& params = model.params();
  params.Init(42);
  // Scale weights up from the 0.02 init so the comparison exercises non-trivial activations.
  params.ForEach([](const ParamInfo& info, Tensor w, Tensor, Tensor, Tensor) {
    if (info.init.kind == InitKind::kNormal) {
      for (int64_t i = 0; i < w.numel(); ++i) w.f32()[i] *= 10.0f;
    }
  });
  const testing::Batch b = testing::RandomBatch(2, 11, spec.vocab, 17);
  std::vector<float> logits;
  const double loss = testing::ForwardBackward(model.stage(), params, b, 1, &logits).loss;

  const fs::path dir =
      fs::temp_directory_path() / ("pm_golden_" + spec.name + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  nlohmann::json cfg = {{"layers", spec.layers},
                        {"heads", spec.heads},
                        {"kv_heads", spec.kv_heads},
                        {"head_dim", spec.head_dim},
                        {"rope_theta", spec.rope_theta},
                        {"norm_eps", spec.norm_eps},
                        {"tied_embeddings", spec.tied_embeddings},
                        {"batch", b.batch},
                        {"seq", b.seq},
                        {"experts", spec.moe.experts},
                        {"top_k", spec.moe.top_k},
                        {"capacity_factor", spec.moe.capacity_factor},
                        {"aux_loss_coef", aux_coef},
                        {"z_loss_coef", z_coef}};
  std::ofstream(dir / "config.json") << cfg.dump();
  nlohmann::json meta = nlohmann::json::array();
  std::vector<float> flat;
  std::vector<float> grads;
  params.ForEach([&](const ParamInfo& info, Tensor w, Tensor g, Tensor, Tensor) {
    std::vector<int64_t> shape(info.global_shape.dims,
                               info.global_shape.dims + info.global_shape.rank);
    meta.push_back({{"name", info.name}, {"shape", shape}, {"offset", flat.size()}});
    flat.insert(flat.end(), w.f32(), w.f32() + w.numel());
    grads.insert(grads.end(), g.f32(), g.f32() + g.numel());
  });
  std::ofstream(dir / "params.json") << meta.dump();
  WriteBin(dir / "params.bin", flat.data(), flat.size());
  WriteBin(dir / "tokens.bin", b.tokens.data(), b.tokens.size());
  WriteBin(dir / "targets.bin", b.targets.data(), b.targets.size());
  const std::string cmd =
      "/usr/bin/python3 " PM_SOURCE_DIR "/tests/golden/oracle.py " + dir.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  double ref_loss = 0;
  std::ifstream(dir / "loss.txt") >> ref_loss;
  EXPECT_LE(std::fabs(loss - ref_loss) / std::fabs(ref_loss), 1e-5) << loss << " vs " << ref_loss;
  const std::vector<double> ref_logits = ReadDoubles(dir / "logits.bin");
  ASSERT_EQ(ref_logits.size(), logits.size());
  EXPECT_LE(RelError(logits.data(), ref_logits.data(), static_cast<int64_t>(logits.size())), 1e-5);
  const std::vector<double> ref_grads = ReadDoubles(dir / "grads.bin");
  ASSERT_EQ(ref_grads.size(), grads.size());
  for (const auto& m : meta) {
    const int64_t offset = m["offset"],
                  n = static_cast<int64_t>(params.info(params.Find(m["name"])).numel());
    const double err = RelError(grads.data() + offset, ref_grads.data() + offset, n);
    EXPECT_LE(err, 1e-5) << m["name"];
  }
  fs::remove_all(dir);
}

TEST(Golden, DenseMatchesPytorch) { CompareWithOracle(testing::TinyDense(), 0, 0); }

TEST(Golden, MoeDroplessMatchesPytorch) {
  spec::ModelSpec spec = testing::TinyMoe();
  spec.tied_embeddings = true;
  CompareWithOracle(spec, 0.1, 0.01);
}

}  // namespace
}  // namespace pentamesh::model
