// `pentamesh plan --recipe R`: plan::PlanRecipe on the plan's model and cluster, printed as a
// table of phases (text) or JSON.
#pragma once

#include <string>

#include "cli/goodput_flags.h"
#include "cli/plan_common.h"

namespace pentamesh::cli {

struct RecipeRunArgs {
  SearchArgs search;  // search.train is empty
  std::string recipe;
  int top = 5;
  GoodputArgs goodput;
};

int RunPlanRecipe(const RecipeRunArgs& args);

}  // namespace pentamesh::cli
