// Per-layer bars: activation bytes kept vs recomputed, and forward /
// backward / recompute time, one row per layer with its decision.
#ifndef REMAT_VISUALIZE_LAYER_CHART_H_
#define REMAT_VISUALIZE_LAYER_CHART_H_

#include <string>
#include <vector>

#include "layer_rows.h"

namespace remat::viz {

// An <svg id="layer-bars">: a row per layer (<g class="layer-row">) with a
// decision chip, a memory bar (<rect class="bar-kept">, <rect
// class="bar-recomputed">) on a byte axis and a time bar (<rect
// class="bar-forward|bar-backward|bar-recompute">) on a ms axis.
std::string LayerChart(const std::vector<LayerRow>& rows);

}  // namespace remat::viz

#endif  // REMAT_VISUALIZE_LAYER_CHART_H_
