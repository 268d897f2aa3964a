"""What the course (labqueue.lab) and the tools (labqueue.bench, labqueue.chaos) share:
the demo job handlers and the scratch folder for throwaway databases. The tools import
these from here, never from the course; the course keeps its own names for them
(labqueue.lab.demo_handlers, labqueue.lab.scratch). The queue itself imports nothing
from here."""
