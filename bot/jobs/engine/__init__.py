"""What runs the jobs, and the owner's view of it.

``scheduler`` (APScheduler, off the event loop through ``offloop``), ``leader`` (one
process runs the jobs), ``timer`` (a push leaves at its minute, not at the next poll),
``presence`` (each process's heartbeat and log lines), ``control`` (the owner's page).
"""
