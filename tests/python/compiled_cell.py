"""One compiled-peak cell: a script run in a process of its own (the
meter loaded first) that plans with compile=True, applies the plan,
compiles the model and meters a step, printing one JSON line
(remat_compile_peak.py, remat_sentence_compile_peak.py); run() runs it,
check() asserts what every such cell must show."""
import json
import os
import subprocess
import sys


def run(test, script, args, trace_cache):
    """The cell's JSON line, `script` (beside this file) run with `args`,
    its traces cached in `trace_cache` (one trace for a test's cells)."""
    env = dict(os.environ, REMAT_PYTHON=sys.executable, REMAT_TRACE_CACHE=trace_cache)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), script)
    done = subprocess.run([sys.executable, path] + list(args), env=env, capture_output=True,
                          text=True)
    test.assertEqual(done.returncode, 0, done.stderr[-3000:])
    got = json.loads(done.stdout.strip().splitlines()[-1])
    test.assertEqual(got["source"], "traced (torch.compile)")
    test.assertTrue(got["fits"], got)
    return got


def check(test, got, label, tolerance=0.03):
    """The measured peak within `tolerance` of the prediction and at or
    below the plan's budget, and the compiled step's gradients within the
    rounding bound of a float64 eager step (gradient_error at most 1)."""
    miss = got["measured_peak_bytes"] / got["predicted_peak_bytes"] - 1
    print(f"{label}: predicted {got['predicted_peak_bytes']:,} B, measured "
          f"{got['measured_peak_bytes']:,} B ({100 * miss:+.2f}%), budget "
          f"{got['budget_bytes']:,} B, eager prediction "
          f"{got['eager_predicted_peak_bytes']:,} B", file=sys.stderr)
    test.assertLessEqual(abs(miss), tolerance, got)
    test.assertLessEqual(got["measured_peak_bytes"], got["budget_bytes"], got)
    test.assertLessEqual(got["gradient_error"], 1.0, got)
