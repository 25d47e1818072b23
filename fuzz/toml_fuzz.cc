// libFuzzer target: arbitrary bytes as a TOML spec file. Loading must return a value or a Status
// naming the field, never crash; a file whose [model], [cluster] and [train] all load is then
// validated and costed (the cost model must not crash or hit UB on any spec the loader accepts).
// The same bytes as a [recipe]: a recipe that loads splits into parts (the ramp's arithmetic)
// whose train specs are valid (a positive batch that is a multiple of the sequence).
#include <cstddef>
#include <cstdint>
#include <string>

#include "cost/cost.h"
#include "spec/layout.h"
#include "spec/load_toml.h"
#include "spec/recipe.h"
#include "spec/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pentamesh;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto model = spec::ModelFromTomlText(text, "fuzz");
  auto cluster = spec::ClusterFromTomlText(text, "fuzz");
  auto train = spec::TrainFromTomlText(text, "fuzz");
  if (auto recipe = spec::RecipeFromTomlText(text, "fuzz"); recipe.ok()) {
    for (size_t i = 0; i < recipe->phases.size(); ++i) {
      for (const spec::PhasePart& part : spec::PhaseParts(*recipe, i)) {
        const spec::TrainSpec& t = part.train;
        if (t.seq_len <= 0 || t.global_batch_tokens < t.seq_len ||
            t.global_batch_tokens % t.seq_len != 0 || !(t.total_tokens > 0)) {
          __builtin_trap();
        }
      }
    }
  }
  // The same bytes as a layout string (the CLI's --layout).
  auto layout = spec::ParseLayout(text);
  if (!model.ok() || !cluster.ok() || !train.ok()) return 0;
  (void)cost::CheckStatedParams(*model);
  const cost::Context ctx(*model, *cluster, *train);
  const spec::Layout layouts[] = {
      layout.ok() ? *layout : spec::Layout{},
      spec::Layout{.dp = cluster->gpus()},
      spec::Layout{
          .tp = cluster->gpus_per_node, .pp = 2, .zero = 3, .recompute = spec::Recompute::kFull},
  };
  for (const spec::Layout& l : layouts) {
    if (l.dp <= 0) continue;
    (void)spec::Validate(*model, *cluster, *train, l);
    const cost::Estimate e = cost::EstimateLayout(ctx, l, /*explain=*/true);
    if (e.fits && !(e.time.step > 0)) __builtin_trap();  // a fitting layout has a step time
  }
  return 0;
}
