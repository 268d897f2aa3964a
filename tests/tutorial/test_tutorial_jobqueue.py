"""The tutorial's own test suite, run against the course's labqueue.tutorial. The suite
lives in the package (labqueue/tutorial/test_jobqueue.py), so notebook 11 can run it on a
learner's copy; importing its tests and fixtures here makes pytest collect all of them."""

from labqueue.tutorial.test_jobqueue import *  # noqa: F403
