// remat planner library: the one header to include.
//
//   model.json --(analytic.h)--> Profile --(plan.h: strategies)--> Plan
//   Plan.schedule --(simulator.h)--> predicted timeline, peak, step time
//
// The planner never depends on LibTorch. runtime/ executes the same Schedule.
#ifndef REMAT_PLANNER_H_
#define REMAT_PLANNER_H_

#include "remat/analytic.h"
#include "remat/decisions.h"
#include "remat/engine_plan.h"
#include "remat/export.h"
#include "remat/input.h"
#include "remat/io.h"
#include "remat/job.h"
#include "remat/model_config.h"
#include "remat/pareto.h"
#include "remat/plan.h"
#include "remat/plan_file.h"
#include "remat/planning.h"
#include "remat/profile.h"
#include "remat/report.h"
#include "remat/runtime_api.h"
#include "remat/schedule.h"
#include "remat/simulator.h"
#include "remat/status.h"
#include "remat/strategies.h"
#include "remat/train_report.h"
#include "remat/training.h"
#include "remat/units.h"

#endif  // REMAT_PLANNER_H_
