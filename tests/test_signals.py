"""labqueue.signals.StopEvent: a stop flag that signal handlers set (the stats --watch,
metrics and chaos loops wait on it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from labqueue.signals import StopEvent, stop_on


def test_it_waits_for_its_timeout_then_ends_at_once_when_set():
    stop = StopEvent()
    started = time.monotonic()
    assert stop.wait(0.05) is False and not stop.is_set()
    assert time.monotonic() - started >= 0.05
    threading.Timer(0.05, stop.set).start()
    assert stop.wait(30) is True and stop.is_set()
    assert stop.wait(30) is True  # every later wait returns at once
    stop.close()


# A loop that waits in very short steps and is sent SIGINT over and over: each signal arrives
# at an arbitrary point of the wait. With threading.Event, set() inside the handler hung the
# main thread for ever when the signal came while it held the event's lock.
LOOP = """
import os, signal, sys
from labqueue.signals import stop_on
for round in range(int(sys.argv[1])):
    stop = stop_on(signal.SIGINT)
    print("ready", flush=True)
    while not stop.wait(0.0001):
        pass
    stop.close()
print("done", flush=True)
"""


def test_a_signal_at_any_point_of_a_wait_ends_it():
    rounds = 1000  # threading.Event hung within 10 to 100 rounds, in most tries
    proc = subprocess.Popen(
        [sys.executable, "-c", LOOP, str(rounds)], stdout=subprocess.PIPE, text=True, env=os.environ
    )
    try:
        for _ in range(rounds):
            assert proc.stdout.readline() == "ready\n"
            proc.send_signal(signal.SIGINT)
        assert proc.stdout.readline() == "done\n"
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()


def test_stop_on_replaces_the_handler_so_the_signal_only_sets_the_flag():
    previous = signal.getsignal(signal.SIGUSR1)
    try:
        stop = stop_on(signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert stop.wait(30) is True
        stop.close()
    finally:
        signal.signal(signal.SIGUSR1, previous)
