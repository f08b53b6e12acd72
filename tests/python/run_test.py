"""Runs test modules as CTest sees them: python run_test.py MODULE...

CTest has one status per test and a test here is a whole file, so the
file's cases decide it, failures first:
  exit 1        a case failed or errored, or no case ran at all (Failed);
  exit 77       none failed, but at least one case, or one subtest, was
                skipped, for whatever reason (Skipped: needs.SKIPPED, the
                tests' SKIP_RETURN_CODE);
  exit 0        every case ran and passed (Passed).
A file is therefore Passed only when it ran all of itself. A case that may
skip where the rest of its file runs (one that needs a GPU) belongs in a
file of its own, so that its file's status is its own.

$REMAT_TEST_HIDE_MODULES (needs.py) plants missing modules.
"""
import sys
import unittest

import needs


def case_name(test):
    test = getattr(test, "test_case", test)  # a subtest: its case
    return test.id()


def main(argv):
    if len(argv) < 2:
        print("usage: run_test.py MODULE...", file=sys.stderr)
        return 2
    needs.hide_planted()
    suite = unittest.defaultTestLoader.loadTestsFromNames(argv[1:])
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = sorted({(case_name(t), r) for t, r in result.skipped})
    skipped_cases = {name for name, _ in skipped}
    label = " ".join(argv[1:])
    print(f"run_test: {label}: {result.testsRun} cases, {len(skipped_cases)} skipped, "
          f"{failed} failed or errored", file=sys.stderr)
    for name, why in skipped:
        print(f"run_test:   skipped {name}: {why}", file=sys.stderr)
    if failed:
        return 1
    if result.testsRun == 0:
        print(f"run_test: {label}: no cases ran", file=sys.stderr)
        return 1
    if skipped:
        print(f"run_test: {label}: reported as skipped (exit {needs.SKIPPED}): not every case ran",
              file=sys.stderr)
        return needs.SKIPPED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
