// The HTML page of `pentamesh validate`: predicted vs measured tokens/s per GPU on log-log axes
// (one colour per stack), the error by source group and by GPU count, and the table of runs.
// Charts by report/chart.h (Vega, inlined). Invariant: one self-contained file (inline style and
// script, nothing fetched), every string escaped.
#pragma once

#include <string>

#include "calib/validate.h"

namespace pentamesh::report {

std::string CalibrationHtml(const calib::Validation& v, const std::string& runs_path);

}  // namespace pentamesh::report
