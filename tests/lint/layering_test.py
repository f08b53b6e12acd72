#!/usr/bin/env python3
"""The layering check on small trees: clean ones pass, a planted upward
include, a file in no layer and an include found nowhere fail, naming the
file, the line and the layers.

    tests/lint/layering_test.py
"""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layering  # noqa: E402


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
        f.write(text)


LAYERS_CMAKE = """set(REMAT_LAYERS
  io        # status
  profile   # profiles
  analytic
  simulate
  strategies
  planning
  report
)
"""


def clean_tree(root):
    write(root, "planner/CMakeLists.txt", LAYERS_CMAKE)
    write(root, "planner/include/remat/io/status.h", "#pragma once\n")
    write(root, "planner/include/remat/profile/profile.h", '#include "remat/io/status.h"\n')
    write(root, "planner/include/remat/planning/planning.h", '#include "remat/profile/profile.h"\n')
    write(root, "planner/src/analytic/chain.h", '#include "remat/profile/profile.h"\n')
    write(root, "planner/src/analytic/chain.cc",
          '#include "analytic/chain.h"\n#include <vector>\n#include "remat/io/status.h"\n')
    write(root, "planner/cli/main.cc", '#include "remat/planning/planning.h"\n#include "args.h"\n')
    write(root, "planner/cli/args.h", '#include "remat/io/status.h"\n')
    write(root, "runtime/src/device.h", '#include "remat/profile/profile.h"\n')
    write(root, "planner/include/remat/planner.h", '#include "remat/planning/planning.h"\n')


def run(root):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = layering.main(["layering.py", root])
    return code, out.getvalue()


class LayeringCheck(unittest.TestCase):
    def test_a_clean_tree_passes(self):
        with tempfile.TemporaryDirectory() as root:
            clean_tree(root)
            code, out = run(root)
            self.assertEqual(code, 0, out)

    def test_an_upward_include_fails_naming_file_line_and_layers(self):
        with tempfile.TemporaryDirectory() as root:
            clean_tree(root)
            write(root, "planner/include/remat/profile/profile.h",
                  '#include "remat/io/status.h"\n#include "remat/planning/planning.h"\n')
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("planner/include/remat/profile/profile.h:2: profile includes "
                          "planner/include/remat/planning/planning.h (planning, a layer above)", out)

    def test_a_local_include_resolves_and_is_checked_too(self):
        with tempfile.TemporaryDirectory() as root:
            clean_tree(root)
            write(root, "planner/src/strategies/solvers.h", '#include "remat/profile/profile.h"\n')
            write(root, "planner/src/analytic/chain.cc", '#include "strategies/solvers.h"\n')
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("planner/src/analytic/chain.cc:1: analytic includes "
                          "planner/src/strategies/solvers.h (strategies, a layer above)", out)

    def test_the_runtime_may_not_include_the_planning_layer(self):
        with tempfile.TemporaryDirectory() as root:
            clean_tree(root)
            write(root, "runtime/src/device.h", '#include "remat/planning/planning.h"\n')
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("runtime/src/device.h:1: simulate includes", out)

    def test_a_file_in_no_layer_and_an_include_found_nowhere_fail(self):
        with tempfile.TemporaryDirectory() as root:
            clean_tree(root)
            write(root, "planner/src/grab_bag.h", "#pragma once\n")
            write(root, "planner/cli/args.h", '#include "remat/missing.h"\n')
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("planner/src/grab_bag.h: in no layer", out)
            self.assertIn('planner/cli/args.h:1: includes "remat/missing.h", found nowhere', out)

    def test_a_folder_outside_the_list_and_a_loose_header_fail(self):
        with tempfile.TemporaryDirectory() as root:
            clean_tree(root)
            write(root, "planner/src/helpers/misc.cc", "int x;\n")
            write(root, "planner/include/remat/loose.h", "#pragma once\n")
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("planner/src/helpers/: a folder that is no layer", out)
            self.assertIn("planner/include/remat/loose.h: in no layer", out)

    def test_a_relative_include_cannot_route_around_the_layers(self):
        with tempfile.TemporaryDirectory() as root:
            clean_tree(root)
            write(root, "planner/src/analytic/chain.cc", '#include "../../include/remat/report/r.h"\n')
            write(root, "planner/include/remat/report/r.h", "#pragma once\n")
            code, out = run(root)
            self.assertEqual(code, 1, out)
            self.assertIn("planner/src/analytic/chain.cc:1: analytic includes "
                          "planner/include/remat/report/r.h (report, a layer above)", out)

    def test_the_umbrella_header_may_include_every_layer_and_the_cli_the_umbrella(self):
        with tempfile.TemporaryDirectory() as root:
            clean_tree(root)
            write(root, "planner/cli/main.cc", '#include "remat/planner.h"\n')
            code, out = run(root)
            self.assertEqual(code, 0, out)


if __name__ == "__main__":
    unittest.main()
