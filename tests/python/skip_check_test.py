"""A skipped test shows as skipped, and CI refuses a skip it does not allow.

  - A real test file (hf_families_test) with transformers planted missing
    ($REMAT_TEST_HIDE_MODULES, tests/python/needs.py), run by CTest as the
    build registers it (run_test.py, SKIP_RETURN_CODE 77), is reported
    Skipped, not Passed; scripts/check-skips.sh, given that ctest output and
    .ci/allowed-skips, rejects it by name and exits 1, while a planted GPU
    test's skip, which the list allows, passes.
  - run_test.py's rule: a file whose cases all ran and passed exits 0; one
    with any skipped case or subtest exits 77; a failure exits 1 even where
    another case skipped; a file with no cases exits 1.
  - The planted module is missing to imports too, not only to needs.missing.

Run by CTest (python_skip_check) with CTEST (the ctest executable) and
REMAT_SOURCE_DIR set.
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("REMAT_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
CTEST = os.environ.get("CTEST", "ctest")
CHECK = os.path.join(SOURCE, "scripts", "check-skips.sh")
ALLOWED = os.path.join(SOURCE, ".ci", "allowed-skips")
RUNNER = os.path.join(HERE, "run_test.py")


def cmake_quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class PlantedMissingModule(unittest.TestCase):
    """A CTest project of three tests, written by hand (no configure): the
    real hf_families_test with transformers hidden, a planted GPU test
    that skips (exit 77) and one that passes."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        tests = [
            ("python_hf_families", [sys.executable, "-B", RUNNER, "hf_families_test"],
             f"REMAT_TEST_HIDE_MODULES=transformers;PLANNER=/nonexistent;"
             f"REMAT_SOURCE_DIR={SOURCE}"),
            ("GpuMeter.CountsCachingAllocatorBytes", ["sh", "-c", "echo no GPU; exit 77"], ""),
            ("passes", [sys.executable, "-c", "pass"], ""),
        ]
        with open(os.path.join(cls.dir.name, "CTestTestfile.cmake"), "w") as f:
            for name, command, env in tests:
                f.write(f"add_test({cmake_quote(name)} {' '.join(map(cmake_quote, command))})\n")
                f.write(f"set_tests_properties({cmake_quote(name)} PROPERTIES SKIP_RETURN_CODE 77 "
                        f"WORKING_DIRECTORY {cmake_quote(HERE)} "
                        f"ENVIRONMENT {cmake_quote(env)})\n")
        cls.log = os.path.join(cls.dir.name, "ctest.log")
        run = subprocess.run([CTEST, "--test-dir", cls.dir.name, "--output-on-failure"],
                             capture_output=True, text=True, timeout=240)
        cls.ctest_rc, cls.ctest_out = run.returncode, run.stdout + run.stderr
        with open(cls.log, "w") as f:
            f.write(run.stdout)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def check(self, log):
        run = subprocess.run(["bash", CHECK, log, ALLOWED], capture_output=True, text=True)
        return run.returncode, run.stdout + run.stderr

    def test_ctest_reports_the_file_skipped_not_passed(self):
        lines = [l for l in self.ctest_out.splitlines() if "Test #" in l]
        hf = [l for l in lines if "python_hf_families" in l]
        self.assertEqual(len(hf), 1, self.ctest_out)
        self.assertIn("***Skipped", hf[0])
        self.assertNotIn("Passed", hf[0])
        self.assertIn("passes", " ".join(lines))
        self.assertEqual(self.ctest_rc, 0, self.ctest_out)  # CTest itself lets skips by

    def test_the_check_rejects_it_by_name_and_allows_the_gpu_test(self):
        rc, out = self.check(self.log)
        self.assertEqual(rc, 1, out)
        self.assertIn("python_hf_families (Skipped): NOT ALLOWED", out)
        self.assertIn("GpuMeter.CountsCachingAllocatorBytes (Skipped): allowed by", out)
        self.assertIn("2 test(s) did not run", out)

    def test_without_the_planted_file_the_check_passes(self):
        run = subprocess.run([CTEST, "--test-dir", self.dir.name, "-E", "python_hf_families"],
                             capture_output=True, text=True, timeout=120)
        log = os.path.join(self.dir.name, "allowed.log")
        with open(log, "w") as f:
            f.write(run.stdout)
        rc, out = self.check(log)
        self.assertEqual(rc, 0, out)
        self.assertIn("1 test(s) did not run", out)

    def test_the_check_refuses_what_is_not_ctest_output(self):
        log = os.path.join(self.dir.name, "empty.log")
        with open(log, "w") as f:
            f.write("make: *** [all] Error 2\n")
        rc, out = self.check(log)
        self.assertEqual(rc, 2, out)


class RunnerRule(unittest.TestCase):
    """run_test.py on test modules planted in a scratch directory."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        with open(os.path.join(self.dir.name, "planted_present.py"), "w") as f:
            f.write("VALUE = 1\n")

    def run_module(self, body, env=None):
        with open(os.path.join(self.dir.name, "planted_test.py"), "w") as f:
            f.write("import unittest\n\nimport needs\n\n" + textwrap.dedent(body))
        full = dict(os.environ, PYTHONPATH=os.pathsep.join([self.dir.name, HERE]))
        full.pop("REMAT_TEST_HIDE_MODULES", None)
        full.update(env or {})
        run = subprocess.run([sys.executable, "-B", RUNNER, "planted_test"], cwd=self.dir.name,
                             env=full, capture_output=True, text=True, timeout=120)
        return run.returncode, run.stderr

    def test_every_case_run_and_passed_is_0(self):
        rc, err = self.run_module("""
            class T(unittest.TestCase):
                def test_a(self): pass
                def test_b(self): pass
            """)
        self.assertEqual(rc, 0, err)
        self.assertIn("2 cases, 0 skipped, 0 failed", err)

    def test_one_skipped_case_among_passing_ones_is_77(self):
        rc, err = self.run_module("""
            class T(unittest.TestCase):
                def test_runs(self): pass
                @needs.modules("remat_no_such_module")
                def test_needs_a_module(self): pass
            """)
        self.assertEqual(rc, 77, err)
        self.assertIn("skipped planted_test.T.test_needs_a_module: needs remat_no_such_module", err)

    def test_a_skipped_subtest_is_77(self):
        rc, err = self.run_module("""
            class T(unittest.TestCase):
                def test_cells(self):
                    for cell in ("a", "b"):
                        with self.subTest(cell=cell):
                            if cell == "b":
                                needs.skip_without(self, "remat_no_such_module")
            """)
        self.assertEqual(rc, 77, err)

    def test_a_failure_beats_a_skip(self):
        rc, err = self.run_module("""
            class T(unittest.TestCase):
                def test_fails(self): self.fail("planted")
                @needs.modules("remat_no_such_module")
                def test_skips(self): pass
            """)
        self.assertEqual(rc, 1, err)

    def test_no_cases_is_a_failure(self):
        rc, err = self.run_module("X = 1\n")
        self.assertEqual(rc, 1, err)
        self.assertIn("no cases ran", err)

    def test_a_hidden_module_is_missing_to_needs_and_to_import(self):
        body = """
            class T(unittest.TestCase):
                def test_needs(self):
                    needs.skip_without(self, "planted_present")
                def test_import(self):
                    try:
                        import planted_present  # noqa: F401
                    except ModuleNotFoundError:
                        self.skipTest("import fails")
            """
        rc, err = self.run_module(body)
        self.assertEqual(rc, 0, err)
        rc, err = self.run_module(body, {"REMAT_TEST_HIDE_MODULES": "planted_present"})
        self.assertEqual(rc, 77, err)
        self.assertIn("skipped planted_test.T.test_import: import fails", err)
        self.assertIn("skipped planted_test.T.test_needs: needs planted_present", err)


if __name__ == "__main__":
    unittest.main()
