"""The queue that Part 1 of the course builds: the notebooks' own cells, as modules.

- `race` (notebook 01): three ways to claim a job, raced by worker processes.
- `jobqueue` (02, 04, 06, 10): the table, `JobQueue` with enqueue, claim, complete, fail,
  heartbeat, requeue_dead and stats.
- `worker` (03): the loop a worker process runs. `keepalive` (06): the heartbeat thread.

Each is generated from the notebooks' cells that start with `# <module>.py`
(`python -m labqueue.tutorial.build`; a test checks that they never differ). `workspace`
keeps a learner's edited copy in step with the cells they run, `kernel` puts the kernel's
definitions back to the course's (a notebook's first cell) and compares them with it, and
`process` starts real worker processes on the copy. The production queue,
`labqueue.JobQueue`, is the same design grown up (notebook 13 sets the two side by side); it
imports nothing from here.
"""
