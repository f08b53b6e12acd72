// remat planner library: the one header to include.
//
//   model.json --(analytic.h)--> Profile --(plan.h: strategies)--> Plan
//   Plan.schedule --(simulator.h)--> predicted timeline, peak, step time
//
// The planner never depends on LibTorch. runtime/ executes the same Schedule.
#ifndef REMAT_PLANNER_H_
#define REMAT_PLANNER_H_

#include "remat/analytic/analytic.h"
#include "remat/schedule/decisions.h"
#include "remat/planning/engine_plan.h"
#include "remat/report/export.h"
#include "remat/input/input.h"
#include "remat/io/io.h"
#include "remat/planning/job.h"
#include "remat/model/model_config.h"
#include "remat/planning/pareto.h"
#include "remat/plan/plan.h"
#include "remat/plan/plan_file.h"
#include "remat/planning/planning.h"
#include "remat/profile/graph_profile.h"
#include "remat/profile/profile.h"
#include "remat/report/graph_report.h"
#include "remat/simulate/graph_simulator.h"
#include "remat/strategies/graph_plan.h"
#include "remat/report/report.h"
#include "remat/schedule/runtime_api.h"
#include "remat/schedule/schedule.h"
#include "remat/simulate/simulator.h"
#include "remat/io/status.h"
#include "remat/strategies/strategies.h"
#include "remat/report/train_report.h"
#include "remat/planning/training.h"
#include "remat/io/units.h"

#endif  // REMAT_PLANNER_H_
