#!/usr/bin/env python3
"""Times benchmark cases on two solver_bench binaries, alternately.

  bench/micro/compare_solvers.py OLD_BENCH NEW_BENCH REPETITIONS CASES OUT.jsonl
  bench/micro/compare_solvers.py --table BENCH [REPETITIONS]
  bench/micro/compare_solvers.py --spread BENCH [REPETITIONS [FAMILIES]]
  bench/micro/compare_solvers.py --shifted BENCH [REPETITIONS]

--table prints the solver benchmark table (docs/solver-measurements.md) from one binary: the
multi-level DP as `--strategy optimal` runs it (single-level DP first, its
value as the cost cap; one thread) with one bound per split and one cap for
every row (MultiLevel/*_previous: chunk bounds and row caps off) and with
both (MultiLevel/*_capped), alternately,
at 64, 256 and 1024 layers, identical blocks (gpt) and distinct ones
(measured: 10% timing noise), 250, 1000 and 4000 slots, the middle budget.
Distinct blocks at 1024 layers and 4000 slots are left out (6 GiB of tables).

--spread prints the pooling table (docs/solver-measurements.md): on the measured chain with
the spread its profiler reports (MultiLevel/spread_*), the exact solver
(spread_capped, what --strategy optimal --exact-times runs) against pooling
the times within their spreads (spread_pooled), alternately, at the same
sizes (the exact one not at 1024 layers and 4000 slots, the created-gradient
family not there at all: 6 GiB of tables), FAMILIES of spread_persistent and
spread (default both), and what pooling
costs: the pooled schedule's recompute time on the chain's own times against
the exact optimum's (counter raw_ms).

--shifted prints the table of rows shared across gradient positions: on the
spread chain (gradients created in backward) pooled, the exact interval
classes (MultiLevel/spread_pooled: no rows shared) against rows read shifted
by the gradients between equal intervals (MultiLevel/spread_shifted), at the
same sizes (the exact classes not at 1024 layers and 4000 slots), with each
schedule's recompute time on the chain's own times.

CASES has one line per case: "OLD_NAME | NEW_NAME[, NEW_NAME...]" (Google
Benchmark names, matched exactly). Each case runs on the old binary, then on
the new one (so a pair sees the same machine load), REPETITIONS times each,
and appends a JSON line with the least and median CPU time (ms), the least
wall time, and the counters of both to OUT.jsonl: two builds of the solver
against each other.
"""
import json
import re
import statistics
import subprocess
import sys


def run(binary, name, repetitions, min_time):
    out = subprocess.run([binary, '--benchmark_filter=^' + re.escape(name) + '$',
                          '--benchmark_format=json', '--benchmark_repetitions=%d' % repetitions,
                          '--benchmark_min_time=%s' % min_time],
                         capture_output=True, text=True, check=True).stdout
    runs = [b for b in json.loads(out)['benchmarks'] if b.get('run_type') == 'iteration']
    if not runs:
        sys.exit('no benchmark named ' + name + ' in ' + binary)
    cpu = [b['cpu_time'] for b in runs]
    return {'cpu_min': min(cpu), 'cpu_median': statistics.median(cpu),
            'wall_min': min(b['real_time'] for b in runs), 'cells_M': runs[0].get('cells_M'),
            'MiB': runs[0].get('solver_MiB'), 'pruned': runs[0].get('pruned_%'),
            'raw_ms': runs[0].get('raw_ms'), 'rows': runs[0].get('rows')}


def grid():
    """The table's sizes: (layers, slots, case suffix, --benchmark_min_time)."""
    for layers in (64, 256, 1024):
        for slots in (250, 1000, 4000):
            case = '/L:%d/budget%%:40/slots:%d' % (layers, slots)
            yield layers, slots, case, '0.05' if layers == 1024 or slots == 4000 else '0.2'


def spread_table(binary, repetitions, families):
    print('| gradients | L | slots | exact (min / median ms) | pooled (min / median ms) '
          '| speed-up (min) | rows, exact / pooled '
          '| recompute on own times, exact / pooled (ms) | cost of pooling |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
    labels = {'spread_persistent': 'buffers', 'spread': 'created'}
    for family, label in [(f, labels[f]) for f in families]:
        for layers, slots, case, min_time in grid():
            if layers == 1024 and slots == 4000 and family == 'spread':
                continue  # no rows shared with gradients created in backward: 6 GiB
            new = run(binary, 'MultiLevel/%s_pooled%s' % (family, case), repetitions, min_time)
            if layers == 1024 and slots == 4000:
                print('| %s | %d | %d | (6 GiB of tables) | %.1f / %.1f | | - / %d | - / %.2f | |'
                      % (label, layers, slots, new['cpu_min'], new['cpu_median'], new['rows'],
                         new['raw_ms']), flush=True)
                continue
            exact = run(binary, 'MultiLevel/%s_capped%s' % (family, case), repetitions, min_time)
            print('| %s | %d | %d | %.1f / %.1f | %.1f / %.1f | %.1fx | %d / %d '
                  '| %.2f / %.2f | %+.2f%% |'
                  % (label, layers, slots, exact['cpu_min'], exact['cpu_median'],
                     new['cpu_min'], new['cpu_median'], exact['cpu_min'] / new['cpu_min'],
                     exact['rows'], new['rows'], exact['raw_ms'], new['raw_ms'],
                     100 * (new['raw_ms'] / exact['raw_ms'] - 1)), flush=True)


def shifted_table(binary, repetitions):
    print('| L | slots | exact classes (min / median ms) | shifted (min / median ms) '
          '| speed-up (min) | rows, exact / shifted | recompute, exact / shifted (ms) |')
    print('|---:|---:|---:|---:|---:|---:|---:|')
    for layers, slots, case, min_time in grid():
        new = run(binary, 'MultiLevel/spread_shifted' + case, repetitions, min_time)
        if layers == 1024 and slots == 4000:
            print('| %d | %d | (6 GiB of tables) | %.1f / %.1f | | - / %d | - / %.2f |'
                  % (layers, slots, new['cpu_min'], new['cpu_median'], new['rows'],
                     new['raw_ms']), flush=True)
            continue
        exact = run(binary, 'MultiLevel/spread_pooled' + case, repetitions, min_time)
        print('| %d | %d | %.1f / %.1f | %.1f / %.1f | %.1fx | %d / %d | %.2f / %.2f |'
              % (layers, slots, exact['cpu_min'], exact['cpu_median'], new['cpu_min'],
                 new['cpu_median'], exact['cpu_min'] / new['cpu_min'], exact['rows'],
                 new['rows'], exact['raw_ms'], new['raw_ms']), flush=True)


def table(binary, repetitions):
    print('| chain | L | slots | previous (min / median ms) | new (min / median ms) '
          '| speed-up (min) | cells (M) | skipped, previous / new |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|')
    for family, label in (('gpt', 'identical'), ('measured', 'distinct')):
        for layers, slots, case, min_time in grid():
            if family == 'measured' and layers == 1024 and slots == 4000:
                continue
            prev = run(binary, 'MultiLevel/%s_previous%s' % (family, case), repetitions,
                       min_time)
            new = run(binary, 'MultiLevel/%s_capped%s' % (family, case), repetitions, min_time)
            print('| %s | %d | %d | %.1f / %.1f | %.1f / %.1f | %.2fx | %.1f | %.0f%% / %.0f%% |'
                  % (label, layers, slots, prev['cpu_min'], prev['cpu_median'],
                     new['cpu_min'], new['cpu_median'], prev['cpu_min'] / new['cpu_min'],
                     new['cells_M'], prev['pruned'], new['pruned']), flush=True)


def main():
    if sys.argv[1] == '--spread':
        spread_table(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3,
                     sys.argv[4].split(',') if len(sys.argv) > 4 else ['spread_persistent', 'spread'])
        return
    if sys.argv[1] == '--shifted':
        shifted_table(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3)
        return
    if sys.argv[1] == '--table':
        table(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3)
        return
    old_bin, new_bin, repetitions, cases, out = sys.argv[1:6]
    with open(out, 'a') as sink:
        for line in open(cases):
            if not line.strip():
                continue
            old_name, new_names = [x.strip() for x in line.split('|')]
            # One iteration per repetition for the cases that take seconds.
            slow = '/L:1024/' in old_name or '/slots:4000' in old_name
            min_time = '0.05' if slow else '0.2'
            results = {'old': run(old_bin, old_name, int(repetitions), min_time)}
            for name in [x.strip() for x in new_names.split(',')]:
                results[name] = run(new_bin, name, int(repetitions), min_time)
            record = json.dumps({'case': old_name, 'results': results})
            sink.write(record + '\n')
            sink.flush()
            print(record, flush=True)


if __name__ == '__main__':
    main()
