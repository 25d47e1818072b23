// Which rows of a micro-batch a tp rank's MoE router sees: the one statement of the layout fact
// that the cost model (cost/terms.cc: the router's grad all-reduce over tp, the balance
// statistics' tp sum) and the engine (train/trainer.cc: model::MoeConfig::routes_rank_rows, the
// routed counts' copies, expert grads spanning tp) both read.
#pragma once

#include "spec/layout.h"

namespace pentamesh::spec {

// Whether each tp rank routes only its own T/tp rows of the micro-batch's T rows (so the router,
// replicated over tp, sees a different slice on every tp rank and its grads are partial sums
// over tp, like a norm's; Megatron marks the router weight sequence_parallel), rather than all T
// rows alike on every tp rank. It needs sequence parallelism with tp > 1 (the rank holds T/tp
// rows of the residual stream). Then:
//   etp = 1:  true; each rank dispatches its own rows to whole experts (validate.cc's kEtp rule
//             makes etp = 1 with tp > 1 require sp = on and the folded placement).
//   etp = tp: up to the implementation. `experts_replicated_over_tp` (the CPU engine, see
//             cost::CostParams::moe_replicated_over_tp) all-gathers the tp ranks' rows and routes
//             all T on every tp rank: false. Megatron-LM routes the rank's rows and splits every
//             expert over tp: true.
// Truth table (tests/spec/moe_routing_test.cc):
//   tp = 1 or sp = off                        -> false
//   tp > 1, sp = on, etp = 1                  -> true
//   tp > 1, sp = on, etp = tp, replicated     -> false
//   tp > 1, sp = on, etp = tp, not replicated -> true
inline bool RoutesRankRows(const Layout& l, bool experts_replicated_over_tp) {
  return l.sp && l.tp > 1 && (l.expert_tp() == 1 || !experts_replicated_over_tp);
}

}  // namespace pentamesh::spec
