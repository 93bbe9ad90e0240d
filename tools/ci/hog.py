#!/usr/bin/python3
"""A CPU hog for planting a slowdown without a code change (tools/ci/bench.sh --candidate-hog).

usage: hog.py PROCESSES DUTY

Starts PROCESSES busy processes; each spins for DUTY x 10 ms and sleeps for the
rest of every 10 ms period (DUTY in (0, 1]; 1: spins all the time). Runs until
killed (SIGTERM ends all of them).
"""
import multiprocessing
import os
import signal
import sys
import time

PERIOD = 0.01


def spin(duty):
    while True:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < duty * PERIOD:
            pass
        if duty < 1:
            time.sleep((1 - duty) * PERIOD)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    n, duty = int(sys.argv[1]), float(sys.argv[2])
    if n < 1 or not 0 < duty <= 1:
        print("hog.py: PROCESSES >= 1, DUTY in (0, 1]", file=sys.stderr)
        return 2
    procs = [multiprocessing.Process(target=spin, args=(duty,), daemon=True) for _ in range(n)]
    for p in procs:
        p.start()

    def stop(*_):
        for p in procs:
            p.terminate()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for p in procs:
        p.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
