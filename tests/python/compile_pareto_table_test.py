"""bench/compile/pareto.py's table and page on synthetic points: at each of
compile's peaks, remat's fastest plan at or below it (a peak equal to
compile's counts, a faster plan above it does not) and the time ratio;
compile's peak monotone in its budget or the pairs where it is not; the
HTML page carries the report stylesheet and one point per measured point.
Pure Python (no torch, nothing timed)."""
import os
import sys
import unittest

SOURCE = os.environ.get("REMAT_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE, "bench", "compile"))
import pareto_chart  # noqa: E402
import pareto_table  # noqa: E402


def c(budget, peak, ms):
    return dict(series="compile", name=f"compile budget {budget}", budget=budget,
                peak_bytes=peak, step_s=ms / 1e3, first_step_s=1.0)


def r(name, peak, ms):
    return dict(series="remat", name=name, peak_bytes=peak, step_s=ms / 1e3, first_step_s=1.0)


POINTS = [c(1.0, 100, 10.0), c(0.5, 60, 12.0), c(0.1, 70, 15.0), c(0.0, 30, 20.0),
          r("none", 100, 9.0), r("a", 70, 11.0), r("b", 55, 14.0), r("c", 60, 13.0),
          r("d", 61, 8.0)]


class Rows(unittest.TestCase):
    def test_fastest_at_or_below_each_compile_peak(self):
        got = [(row["compile"]["budget"], row["remat"] and row["remat"]["name"], row["ratio"])
               for row in pareto_table.rows(POINTS)]
        self.assertEqual([g[:2] for g in got],
                         [(1.0, "d"), (0.5, "c"), (0.1, "d"), (0.0, None)])
        self.assertAlmostEqual(got[0][2], 8.0 / 10.0)
        self.assertAlmostEqual(got[1][2], 13.0 / 12.0)  # c: peak 60 = compile's 60 counts
        self.assertIsNone(got[3][2])

    def test_markdown_names_unreached_levels(self):
        text = pareto_table.markdown(POINTS)
        self.assertIn("| 0.0 | 30 B | 20.00 ms | (none reaches it) |", text)
        self.assertIn("| 0.5 | 60 B | 12.00 ms | c | 60 B | 13.00 ms | 1.083 |", text)


class Monotone(unittest.TestCase):
    def test_breaks_are_the_lower_budgets_peaking_higher(self):
        breaks = [(lo["budget"], hi["budget"]) for lo, hi in pareto_table.monotone_breaks(POINTS)]
        self.assertEqual(breaks, [(0.1, 0.5)])
        self.assertIn("not monotone", pareto_table.markdown(POINTS))

    def test_monotone_points_have_no_break(self):
        points = [c(0.0, 30, 1.0), c(0.5, 30, 1.0), c(1.0, 90, 1.0)]
        self.assertEqual(pareto_table.monotone_breaks(points), [])
        self.assertIn("is monotone", pareto_table.markdown(points))


class Page(unittest.TestCase):
    def test_page_has_the_report_style_and_every_point(self):
        page = pareto_chart.html_page(POINTS, {"model": "llama"}, "bench/compile/pareto.py")
        self.assertIn(pareto_chart.report_css(), page)
        self.assertIn("--ink:", pareto_chart.report_css())
        self.assertEqual(page.count('<g class="point"'), len(POINTS))
        self.assertEqual(page.count('data-series="compile"'), 4)
        self.assertNotIn("<script", page)


if __name__ == "__main__":
    unittest.main()
