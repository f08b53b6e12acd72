// The table a global-batch search weighed (planning.h: SearchBatch), for the
// terminal.
#ifndef REMAT_BATCH_REPORT_H_
#define REMAT_BATCH_REPORT_H_

#include <string>

#include "remat/planning/planning.h"

namespace remat {

// One row per micro-batch weighed: b, K, strategy and setting, peak, time per
// optimizer step, tokens/s, fits; then the micro-batches not planned and the
// choice (or that none fits).
std::string FormatBatchSearchText(const BatchSearch& search);

}  // namespace remat

#endif  // REMAT_BATCH_REPORT_H_
