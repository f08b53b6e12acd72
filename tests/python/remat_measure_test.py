"""python/remat_measure: remat's CPU meter in a PyTorch process.

Run by CTest (label "runtime") with the venv's Python, REMAT_METER_LIB set to
the build's libremat_cpu_meter.so and python/ on PYTHONPATH.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import warnings

import needs
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
        self.assertIn("no meter library beside the package", r.stderr)
        self.assertIn("set REMAT_METER_LIB", r.stderr)

    def test_a_second_library_is_refused(self):
        self.assertIs(remat_measure.load(), METER)
        with self.assertRaises(remat_measure.MeterError):
            remat_measure.load(path=sys.executable)  # exists, is not the loaded meter


class PackageMeter(unittest.TestCase):
    def test_the_meter_beside_the_package_is_found_without_the_variable(self):
        # The layout `pip install .` makes: remat_measure/ holding the library.
        with tempfile.TemporaryDirectory() as d:
            package = os.path.join(d, "remat_measure")
            shutil.copytree(os.path.dirname(remat_measure.__file__), package,
                            ignore=shutil.ignore_patterns("*.so", "__pycache__"))
            os.symlink(METER.path, os.path.join(package, remat_measure.LIBRARY_NAME))
            env = dict(os.environ, PYTHONPATH=d)
            env.pop(remat_measure.ENV_VAR, None)
            r = subprocess.run([sys.executable, "-c", (
                "import remat_measure, torch; print(remat_measure.find_library()); "
                "print(remat_measure.measure(lambda: torch.empty(1000)).peak_bytes)")],
                env=env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.split(), [os.path.join(package, remat_measure.LIBRARY_NAME),
                                                "4000"])

    def test_the_meter_names_the_torch_it_was_built_for(self):
        self.assertEqual(METER._lib.remat_meter_torch_version().decode(),
                         torch.__version__.split("+")[0])
        same = remat_measure.meter._same_release
        self.assertTrue(same("2.11.0", "2.11.1+cu130"))
        self.assertFalse(same("2.10.0", "2.11.0"))
        self.assertFalse(same("2.11.0", "3.11.0"))


BORROWED = None


def sum_of_borrowed():
    return BORROWED.sum()


class Unmetered(unittest.TestCase):
    """Memory the meter did not allocate: a file mapped into memory (as
    safetensors loads weights) and memory borrowed from a Python buffer."""

    def linear_from_safetensors(self, directory):
        from safetensors.torch import load_file, save_file

        path = os.path.join(directory, "model.safetensors")
        save_file({"weight": torch.randn(256, 128), "bias": torch.randn(256)}, path)
        loaded = load_file(path)  # memory-mapped
        lin = torch.nn.Linear(128, 256)
        with torch.no_grad():
            lin.weight.data = loaded["weight"]
            lin.bias.data = loaded["bias"]
        return lin, path

    def test_memory_mapped_weights_are_named_refused_and_copied_into_the_meter(self):
        needs.skip_without(self, "safetensors")
        with tempfile.TemporaryDirectory() as d:
            lin, path = self.linear_from_safetensors(d)
            weight_bytes = 256 * 128 * 4 + 256 * 4
            found = remat_measure.unmetered(lin, names=["lin"])
            self.assertEqual([(u.name, u.nbytes) for u in found],
                             [("lin.weight", 256 * 128 * 4), ("lin.bias", 256 * 4)])
            self.assertEqual(found[0].source, f"memory-mapped from {path}")
            x = torch.randn(4, 128)

            def step():
                return lin(x).sum()

            with self.assertRaises(remat_measure.UnmeteredError) as e:
                remat_measure.measure(step)  # lin: captured by step's closure
            message = str(e.exception)
            print(f"\n{type(e.exception).__name__}: {message}", file=sys.stderr)
            for part in ("lin.weight", path, f"{weight_bytes:,} B", "copy_into_meter"):
                self.assertIn(part, message)
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                m = remat_measure.measure(step, unmetered="warn")
            self.assertEqual(len(m.unmetered), 2)
            self.assertIn("lin.weight", str(seen[0].message))

            expected = lin.weight.detach().clone()
            before = METER.current_bytes()
            self.assertEqual(remat_measure.copy_into_meter(lin), weight_bytes)
            self.assertEqual(METER.current_bytes() - before, weight_bytes)  # now counted
            self.assertEqual(remat_measure.unmetered(lin), [])
            self.assertTrue(torch.equal(lin.weight, expected))
            self.assertEqual(remat_measure.measure(step).unmetered, [])

    def test_borrowed_memory_is_found_where_the_call_shows_it(self):
        borrowed = torch.frombuffer(bytearray(4096), dtype=torch.float32)
        own = torch.zeros(1024)
        found = remat_measure.unmetered(own, borrowed, names=["own", "borrowed"])
        self.assertEqual([(u.name, u.nbytes) for u in found], [("borrowed", 4096)])
        self.assertIn("not from the meter's allocator", found[0].source)
        # As an argument, a keyword argument, in a dict: measure() refuses it.
        for args, kwargs in (((borrowed,), {}), ((), {"t": borrowed}),
                             (({"ids": borrowed},), {})):
            with self.subTest(args=len(args), kwargs=list(kwargs)):
                with self.assertRaises(remat_measure.UnmeteredError):
                    remat_measure.measure(lambda *a, **k: None, *args, **kwargs)
        # Read from a closure, or from a module global (a script's model).
        with self.assertRaises(remat_measure.UnmeteredError) as e:
            remat_measure.measure(lambda: borrowed.sum())
        self.assertIn("borrowed (4,096 B)", str(e.exception))
        global BORROWED
        BORROWED = borrowed
        with self.assertRaises(remat_measure.UnmeteredError) as e:
            remat_measure.measure(sum_of_borrowed)
        self.assertIn("BORROWED (4,096 B)", str(e.exception))
        BORROWED = None
        with self.assertRaises(remat_measure.UnmeteredError):
            remat_measure.check(borrowed)
        remat_measure.check(own)  # metered: no error


if __name__ == "__main__":
    unittest.main()
