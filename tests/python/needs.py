"""What a Python test needs, said one way, so that a case without it is
skipped, visibly, and its file reports Skipped, never Passed.

    import needs
    transformers = needs.optional("transformers")  # the module, or None

    @needs.modules("torch", "transformers")        # on a class or a test
    class Llama(unittest.TestCase): ...

    needs.skip_without(self, "peft")               # inside a test
    @needs.meter_library()                         # remat's CPU meter library
    needs.skip_without_meter(self)                 # the same, inside a test

CTest runs every file through run_test.py, which exits with SKIPPED (the
tests' SKIP_RETURN_CODE) when any case was skipped and none failed.

A module is missing when Python cannot find it, or when it is named in
$REMAT_TEST_HIDE_MODULES (comma-separated): run_test.py then makes importing
it fail as well, so that a missing dependency can be planted on a machine
that has it (skip_check_test.py does).
"""
import importlib
import importlib.util
import os
import unittest

SKIPPED = 77  # exit code of a file with a skipped case (SKIP_RETURN_CODE)
HIDE_VAR = "REMAT_TEST_HIDE_MODULES"
INSTALL_HINT = "scripts/install-deps.sh --references installs what the tests use"


def hidden():
    """The top-level module names $REMAT_TEST_HIDE_MODULES plants as missing."""
    return {m.strip().split(".")[0] for m in os.environ.get(HIDE_VAR, "").split(",") if m.strip()}


def missing(*names):
    """The names among `names` ("torch", "megatron.core") that cannot be
    imported here: not installed, or hidden. Finds without importing."""
    out = []
    for name in names:
        if name.split(".")[0] in hidden():
            out.append(name)
            continue
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # "megatron.core" without "megatron"
            found = False
        if not found:
            out.append(name)
    return out


def reason(names):
    """The one skip message for missing modules."""
    return f"needs {', '.join(names)} (not importable; {INSTALL_HINT})"


def modules(*names):
    """Decorator: skips the class or test where any of `names` is missing."""
    gone = missing(*names)
    return unittest.skipIf(bool(gone), reason(gone))


def skip_without(test, *names):
    """Skips the running test where any of `names` is missing."""
    gone = missing(*names)
    if gone:
        test.skipTest(reason(gone))


def optional(name):
    """`name` imported, or None where it is missing (as missing() says)."""
    if missing(name):
        return None
    return importlib.import_module(name)


def meter_problem():
    """Why remat's CPU meter library cannot be found here, or None when it
    can (remat_measure.find_library(): the package's own, or
    $REMAT_METER_LIB). Finds without loading it."""
    if missing("remat_measure"):
        return reason(["remat_measure"])
    import remat_measure

    try:
        remat_measure.find_library()
    except remat_measure.MeterError as e:
        return f"needs remat's CPU meter ({e})"
    return None


def meter_library():
    """Decorator: skips the class or test where the meter library cannot be
    found."""
    problem = meter_problem()
    return unittest.skipIf(bool(problem), problem or "")


def skip_without_meter(test):
    """Skips the running test where the meter library cannot be found."""
    problem = meter_problem()
    if problem:
        test.skipTest(problem)


class _HiddenFinder:
    """Makes importing a hidden module fail as a missing one does."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in hidden():
            raise ModuleNotFoundError(f"No module named {fullname!r} ({HIDE_VAR})",
                                      name=fullname)
        return None


def hide_planted():
    """Installs the import hook for $REMAT_TEST_HIDE_MODULES (run_test.py
    calls it before the test module is imported); a no-op without it."""
    import sys

    if hidden() and not any(isinstance(f, _HiddenFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _HiddenFinder())
        real_find_spec = importlib.util.find_spec

        def find_spec(name, package=None):
            if name.split(".")[0] in hidden():
                return None
            return real_find_spec(name, package)

        importlib.util.find_spec = find_spec
