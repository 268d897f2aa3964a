"""The course as a read-only website: `python tasks.py site` (python -m labqueue.website)
builds the committed notebooks, outputs as they are, into build/site/ with Sphinx and
myst-nb, offline. See build.py."""
