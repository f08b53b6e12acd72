// What `planner train` reports: a line per step, then the plan's prediction
// (the simulator on the plan's profile and schedule) against what the
// runtime measured, overall and op by op. One comparison, two renderings
// (text and JSON).
#ifndef REMAT_TRAIN_REPORT_H_
#define REMAT_TRAIN_REPORT_H_

#include <string>

#include "remat/schedule/runtime_api.h"
#include "remat/planning/training.h"

namespace remat {

// "step   3  loss 4.1234  peak 12.34 MiB  time 123.4 ms"
std::string FormatStepLine(const StepRecord& step);

// The predicted-vs-measured report (after the step lines).
std::string FormatTrainText(const TrainComparison& c);

// The same as JSON: plan, device, steps, predicted, measured, difference and
// ops (per schedule op: predicted and measured peak and time).
std::string TrainReportJson(const TrainComparison& c);

}  // namespace remat

#endif  // REMAT_TRAIN_REPORT_H_
