#include "spec/moe_routing.h"

#include <gtest/gtest.h>

#include "spec/layout.h"

namespace pentamesh::spec {
namespace {

// The truth table of spec/moe_routing.h, row by row: each tp rank routes only its own T/tp rows
// under sp with tp > 1 when the experts are whole (etp = 1), or split over tp (etp = tp) by an
// implementation that does not replicate them over tp (Megatron-LM); the CPU engine replicates
// them at etp = tp and routes all T gathered rows. tests/mpi/cp_ep_train_test.cc checks the
// engine's routed rows per rank against the replicated column.
TEST(RoutesRankRows, TruthTable) {
  const struct {
    int64_t tp;
    bool sp;
    int64_t etp;  // 0: tp (the default)
    bool replicated;
    bool want;
  } rows[] = {
      // tp = 1: one rank holds all the rows.
      {1, false, 0, false, false},
      {1, false, 0, true, false},
      {1, true, 0, false, false},
      {1, true, 1, true, false},
      // sp = off: every tp rank holds all T rows.
      {2, false, 0, false, false},
      {2, false, 0, true, false},
      {4, false, 0, false, false},
      {2, false, 1, false, false},
      {2, false, 1, true, false},
      // sp = on, etp = 1: whole experts, each rank dispatches its own rows.
      {2, true, 1, false, true},
      {2, true, 1, true, true},
      {4, true, 1, true, true},
      {8, true, 1, false, true},
      // sp = on, etp = tp, experts replicated over tp (the engine): all T rows gathered.
      {2, true, 0, true, false},
      {2, true, 2, true, false},
      {4, true, 4, true, false},
      // sp = on, etp = tp, experts split over tp (Megatron-LM): the rank's own rows.
      {2, true, 0, false, true},
      {2, true, 2, false, true},
      {8, true, 8, false, true},
  };
  for (const auto& r : rows) {
    Layout l;
    l.tp = r.tp;
    l.sp = r.sp;
    l.etp = r.etp;
    l.ep_placement = EpPlacement::kFolded;
    EXPECT_EQ(RoutesRankRows(l, r.replicated), r.want)
        << "tp=" << r.tp << " sp=" << r.sp << " etp=" << r.etp << " replicated=" << r.replicated;
  }
}

// Only tp, sp and etp decide: the other degrees and the placement do not.
TEST(RoutesRankRows, OnlyTpSpAndEtpDecide) {
  for (const bool replicated : {false, true}) {
    Layout base;
    base.tp = 2;
    base.etp = 1;
    base.ep_placement = EpPlacement::kFolded;
    const bool want = RoutesRankRows(base, replicated);
    EXPECT_TRUE(want);
    for (const int64_t d : {1, 2, 4}) {
      Layout l = base;
      l.dp = d, l.pp = d, l.cp = d, l.ep = 2 * d, l.mbs = d;
      EXPECT_EQ(RoutesRankRows(l, replicated), want) << ShortLayout(l);
    }
  }
}

}  // namespace
}  // namespace pentamesh::spec
