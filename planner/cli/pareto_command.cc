// planner pareto [--points N] [--min-budget SIZE] [--max-budget SIZE]
//                [--strategies LIST] [--slots N] [--exact-times] [--json] [-o FILE] INPUT
#include <ostream>
#include <sstream>

#include "commands.h"
#include "job.h"
#include "progress_bar.h"
#include "remat/io/io.h"
#include "remat/planning/pareto.h"
#include "remat/report/pareto_report.h"
#include "remat/io/units.h"

namespace remat::cli {
namespace {

const char kUsage[] = "planner pareto [--points 12] [--json] model.json";

std::vector<FlagSpec> ParetoFlags() {
  std::vector<FlagSpec> f = {
      {"points", "N", "budgets in the sweep, evenly spaced (default 12, 2..1000)"},
      {"min-budget", "SIZE", "lowest budget (default: the lowest peak any strategy reaches)"},
      {"max-budget", "SIZE", "highest budget (default: the peak without checkpointing)"},
      {"strategies", "LIST",
       "strategies to sweep, e.g. uniform,optimal (default: all but auto and manual)"},
      {"slots", "N", "optimal strategies: memory resolution of the solver"},
      {"exact-times", "", "optimal: no pooling of layers within their measured time spread"},
      {"json", "", "print the sweep as JSON instead of the table"},
      {"o", "FILE", "write the JSON to FILE (written atomically)"},
      QuietFlag(),
      {"help", "", "show this help"},
  };
  for (const FlagSpec& j : JobFlags()) f.push_back(j);
  return f;
}

Result<ParetoOptions> ParseOptions(const Args& args) {
  ParetoOptions o;
  REMAT_ASSIGN_OR_RETURN(int64_t points, args.GetInt("points", o.points, 2, 1000));
  REMAT_ASSIGN_OR_RETURN(int64_t slots, args.GetInt("slots", 0, 2, 1 << 20));
  o.points = static_cast<int>(points);
  o.slots = static_cast<int>(slots);
  o.exact_times = args.Has("exact-times");
  for (const char* flag : {"min-budget", "max-budget"}) {
    if (!args.Has(flag)) continue;
    Result<int64_t> b = ParseBytes(args.Get(flag));
    if (!b.ok()) return b.status().WithPrefix(std::string("option --") + flag);
    (std::string(flag) == "min-budget" ? o.min_budget : o.max_budget) = *b;
  }
  if (o.min_budget > 0 && o.max_budget > 0 && o.min_budget > o.max_budget) {
    return Status::Invalid("option --min-budget is above --max-budget");
  }
  if (args.Has("strategies")) {
    std::stringstream list(args.Get("strategies"));
    std::string name;
    while (std::getline(list, name, ',')) {
      Result<Strategy> s = ParseStrategy(name);
      if (!s.ok()) return s.status().WithPrefix("option --strategies");
      o.strategies.push_back(*s);
    }
    if (o.strategies.empty()) return Status::Invalid("option --strategies: the list is empty");
  }
  return o;
}

}  // namespace

Status ParetoCommand(const std::vector<std::string>& argv, Environment& env) {
  const std::vector<FlagSpec> flags = ParetoFlags();
  REMAT_ASSIGN_OR_RETURN(const Args args, Args::Parse(argv, flags));
  if (args.Has("help")) {
    *env.out << "usage: " << kUsage << "\n\n"
             << "Predicted step time against peak memory for each strategy over a range of "
                "budgets.\n\n"
             << FormatFlags(flags);
    return Status::Ok();
  }
  REMAT_ASSIGN_OR_RETURN(const std::string path, InputPath(args, kUsage));
  REMAT_ASSIGN_OR_RETURN(ParetoOptions options, ParseOptions(args));
  REMAT_ASSIGN_OR_RETURN(const Job job, LoadJobFromArgs(path, args));
  ProgressBar progress(*env.err, WithQuiet(env.progress, args));
  options.progress = progress.Callback();
  REMAT_ASSIGN_OR_RETURN(const ParetoCurve curve, ParetoSweep(job.profile, options));
  progress.Finish();
  if (args.Has("o")) {
    REMAT_RETURN_IF_ERROR(WriteOutputFile(args.Get("o"), ParetoToJson(curve, job.profile)));
  }
  const bool json = args.Has("json") && !args.Has("o");
  *env.out << (json ? ParetoToJson(curve, job.profile) : FormatParetoText(curve, job.profile));
  return Status::Ok();
}

}  // namespace remat::cli
