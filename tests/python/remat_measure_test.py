"""python/remat_measure: remat's CPU meter in a PyTorch process.

Run by CTest (label "runtime") with the venv's Python, REMAT_METER_LIB set to
the build's libremat_cpu_meter.so and python/ on PYTHONPATH.
"""
import os
import subprocess
import sys
import unittest

import remat_measure  # before torch allocates the tensors measured here

METER = remat_measure.load()  # from $REMAT_METER_LIB
import torch  # noqa: E402


class Measure(unittest.TestCase):
    def test_a_known_tensor_is_exactly_its_bytes(self):
        m = remat_measure.measure(lambda: torch.empty(1000))  # float32: 4,000 bytes
        self.assertEqual(m.peak_bytes, 4000)
        self.assertEqual(m.current_bytes, 4000)  # the returned tensor is still held
        self.assertEqual(tuple(m.value.shape), (1000,))
        self.assertEqual(m.timeline, [4000])
        del m
        freed = remat_measure.measure(lambda: torch.empty(1000).sum().item())
        self.assertEqual(freed.peak_bytes, 4000 + 4)  # the sum's scalar lives with it
        self.assertEqual(freed.current_bytes, 0)

    def test_the_timeline_rises_and_falls_event_by_event(self):
        def work():
            a = torch.empty(1000)        # +4,000
            b = torch.empty(2000)        # +8,000
            del a                        # -4,000
            c = torch.empty(100)         # +400
            del b, c                     # -8,000, -400

        m = remat_measure.measure(work)
        self.assertEqual(m.timeline, [4000, 12000, 8000, 8400, 400, 0])
        self.assertEqual((m.timeline_events, m.timeline_stride), (6, 1))
        self.assertEqual(m.peak_bytes, 12000)
        self.assertEqual(m.current_bytes, 0)
        self.assertGreaterEqual(m.wall_s, 0.0)
        self.assertGreaterEqual(m.thread_s, 0.0)

    def test_a_long_timeline_is_decimated_by_window_maxima(self):
        sizes = [100, 300, 50, 700, 200, 900, 10, 400, 600, 20]  # floats each

        def work():
            for n in sizes:
                torch.empty(n)  # allocated and freed: two events

        m = remat_measure.measure(work, max_samples=4)
        exact = []
        for n in sizes:
            exact += [4 * n, 0]
        # 20 events in at most 4 samples: the stride doubles to 8 (4 samples
        # of 8 events would need 32; 20 events at stride 4 need 5 > 4).
        self.assertEqual(m.timeline_events, 20)
        self.assertEqual(m.timeline_stride, 8)
        self.assertEqual(m.timeline, [max(exact[i:i + 8]) for i in range(0, 20, 8)])
        self.assertEqual(max(m.timeline), m.peak_bytes)
        self.assertEqual(m.peak_bytes, 4 * 900)

    def test_a_training_step_returns_to_its_baseline(self):
        lin = torch.nn.Linear(64, 64)
        x = torch.randn(32, 64)

        def step():
            lin(x).square().sum().backward()

        step()  # the gradients, allocated by the first step, stay
        m = remat_measure.measure(step)
        self.assertGreater(m.peak_bytes, 32 * 64 * 4)
        self.assertEqual(m.current_bytes, 0)
        self.assertEqual(max(m.timeline), m.peak_bytes)
        self.assertEqual(m.timeline[-1], 0)

    def test_no_timeline_when_not_asked(self):
        m = remat_measure.measure(lambda: torch.empty(10).sum(), timeline=False)
        self.assertEqual((m.timeline, m.timeline_events), ([], 0))
        self.assertEqual(m.peak_bytes, 44)


class Loading(unittest.TestCase):
    def test_a_missing_library_is_one_clear_error(self):
        with self.assertRaises(remat_measure.MeterError) as e:
            remat_measure.find_library(path="/nonexistent/libremat_cpu_meter.so")
        self.assertIn("/nonexistent/libremat_cpu_meter.so", str(e.exception))
        with self.assertRaises(remat_measure.MeterError) as e:
            remat_measure.find_library(build_dir="/nonexistent-build")
        self.assertIn("/nonexistent-build/lib/libremat_cpu_meter.so", str(e.exception))

    def test_the_environment_variable_names_a_missing_library(self):
        env = dict(os.environ, REMAT_METER_LIB="/nonexistent/meter.so")
        r = subprocess.run([sys.executable, "-c", "import remat_measure; remat_measure.load()"],
                           env=env, capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("meter library not found: /nonexistent/meter.so (from REMAT_METER_LIB)",
                      r.stderr)
        env.pop("REMAT_METER_LIB")
        r = subprocess.run([sys.executable, "-c", "import remat_measure; remat_measure.load()"],
                           env=env, capture_output=True, text=True)
        self.assertIn("no meter library: set REMAT_METER_LIB", r.stderr)

    def test_a_second_library_is_refused(self):
        self.assertIs(remat_measure.load(), METER)
        with self.assertRaises(remat_measure.MeterError):
            remat_measure.load(path=sys.executable)  # exists, is not the loaded meter


if __name__ == "__main__":
    unittest.main()
