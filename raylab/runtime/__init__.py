"""The driver process's plumbing, whatever it runs (a matrix of trials, a probe, a step benchmark):

- cluster.py: its Ray connection (an in-process cluster it starts, or one it joins), the session directories it
  keeps, and the end of it;
- stopping.py: the stop signals (SIGTERM, SIGHUP, Ctrl-C) taken from before Ray starts to after it ends;
- console.py: what the command prints, and each worker's output routed to its trial's log.
"""
