"""Scratch databases for the labs, under the name the course uses; they live in
labqueue.demo.scratch, which the tools share."""

from ..demo.scratch import SCRATCH_ENV, db_path, work_folder

__all__ = ["SCRATCH_ENV", "db_path", "work_folder"]
