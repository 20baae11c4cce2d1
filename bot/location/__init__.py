"""Where you were (issue 24): location points in, stays detected, places named.

Pure functions at the bottom (``geo``, ``stays``, ``places``, ``wire``); the service, commands
and agent tools above them.
"""
