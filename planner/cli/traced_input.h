// A config.json whose model_type has no hand-written model, planned from a
// trace of transformers' own class: `python -m remat trace` run as a
// subprocess, its profile cached by the config and the job flags it took
// (docs/trace.md).
#ifndef REMAT_CLI_TRACED_INPUT_H_
#define REMAT_CLI_TRACED_INPUT_H_

#include <optional>
#include <string>

#include "args.h"
#include "remat/io/status.h"

namespace remat::cli {

// When `path` is a config.json whose model_type the planner has no
// hand-written model for (IsHandWrittenModelType), or any config.json under
// --compile (the step torch.compile runs, traced with --compile): the path of its traced
// profile, traced with the job flags --micro-batch, --seq-len, --precision
// and --device and the sentence-transformers job's --head, --pooling,
// --loss, --texts-per-example and --merge-columns (the profile has them
// measured in), by $REMAT_PYTHON (default python3) -m remat trace, into
// $REMAT_TRACE_CACHE (default $XDG_CACHE_HOME/remat/traces, else
// ~/.cache/remat/traces) under a hash of the config's text and those flags
// (--compile among them), reused when there. std::nullopt for any other
// input; under --compile, any other input fails with one line. Fails with one line
// naming the model_type and how to trace it by hand when the tracer cannot
// run (no Python with torch, transformers and remat) or refuses the config.
Result<std::optional<std::string>> TracedProfilePath(const std::string& path, const Args& args);

// The job flags a traced profile takes in (the others apply to it as to a
// measured profile).
inline constexpr const char* kTracedJobFlags[] = {"micro-batch", "seq-len", "precision", "device"};

// The sentence-transformers job flags a traced chain takes in too: the
// tracer runs that job's step (its config's `remat` block sets them as
// well; python/remat/_trace_sentence.py).
inline constexpr const char* kTracedSentenceFlags[] = {"head", "pooling", "loss",
                                                       "texts-per-example", "merge-columns"};

}  // namespace remat::cli

#endif  // REMAT_CLI_TRACED_INPUT_H_
