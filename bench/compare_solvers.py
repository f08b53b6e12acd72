#!/usr/bin/env python3
"""Times benchmark cases on two solver_bench binaries, alternately.

  bench/compare_solvers.py OLD_BENCH NEW_BENCH REPETITIONS CASES OUT.jsonl

CASES has one line per case: "OLD_NAME | NEW_NAME[, NEW_NAME...]" (Google
Benchmark names, matched exactly). Each case runs on the old binary, then on
the new one (so a pair sees the same machine load), REPETITIONS times each,
and appends a JSON line with the least and median CPU time (ms), the least
wall time, and the counters of both to OUT.jsonl. Used for docs/solver.md
("previous against new").
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
            'MiB': runs[0].get('solver_MiB'), 'pruned': runs[0].get('pruned_%')}


def main():
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
