#include "remat/report/batch_report.h"

#include <algorithm>
#include <sstream>

#include "remat/io/units.h"

namespace remat {
namespace {

std::string Cell(const std::string& s, size_t width, bool left) {
  if (s.size() >= width) return left ? s + " " : s;
  const std::string pad(width - s.size(), ' ');
  return left ? s + pad : pad + s;
}

}  // namespace

std::string FormatBatchSearchText(const BatchSearch& search) {
  std::ostringstream o;
  o << "Micro-batches for a global batch of " << search.global_batch
    << " (an update: K micro-steps, K-1 gradient sums, the optimizer step):\n";
  size_t setting_width = 14;
  for (const BatchCandidate& c : search.weighed) {  // the last row may not fit: let it stick out
    if (c.plan.fits) setting_width = std::max(setting_width, c.plan.parameter.size() + 2);
  }
  o << "  " << Cell("b", 6, false) << Cell("K", 7, false) << "  " << Cell("strategy", 16, true)
    << Cell("setting", setting_width, true) << Cell("peak", 12, false)
    << Cell("per update", 12, false) << Cell("tokens/s", 12, false) << "  fits\n";
  for (size_t i = 0; i < search.weighed.size(); ++i) {
    const BatchCandidate& c = search.weighed[i];
    o << (static_cast<int>(i) == search.chosen ? "* " : "  ")
      << Cell(std::to_string(c.micro_batch), 6, false)
      << Cell(std::to_string(c.grad_accumulation), 7, false) << "  "
      << Cell(ToString(c.plan.strategy), 16, true)
      << Cell(c.plan.parameter.empty() ? "-" : c.plan.parameter, setting_width, true)
      << Cell(FormatBytes(c.plan.predicted.peak_bytes), 12, false)
      << Cell(FormatMillis(c.update.update_ms), 12, false)
      << Cell(FormatCount(static_cast<int64_t>(c.update.tokens_per_s)), 12, false) << "  "
      << (c.plan.fits ? "yes" : "no") << "\n";
  }
  if (search.skipped > 0) {
    o << "  (" << search.skipped << " larger micro-batch" << (search.skipped > 1 ? "es" : "")
      << " not planned: activations grow with the micro-batch)\n";
  }
  if (search.chosen >= 0) {
    const BatchCandidate& c = search.weighed[search.chosen];
    o << "Chosen (*): micro_batch " << c.micro_batch << ", grad_accumulation "
      << c.grad_accumulation << ", " << ToString(c.plan.strategy)
      << (c.plan.parameter.empty() ? "" : " (" + c.plan.parameter + ")") << ": "
      << FormatMillis(c.update.update_ms) << " per optimizer step\n\n";
  } else {
    o << "No micro-batch fits the budget.\n\n";
  }
  return o.str();
}

}  // namespace remat
