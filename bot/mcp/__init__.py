"""lifebot and the Model Context Protocol, both ways (issue 32).

- As a server (``server.py``, ``data.py``): another agent (Claude Desktop, an IDE assistant)
  searches one person's memory with sources, reads a day, their facts and rules, what is
  coming up, and, with a write token, remembers, forgets and sets reminders. Over stdio
  (``lifebot mcp serve``) and streamable HTTP at ``/mcp`` on the web port (``http.py``),
  authenticated by the personal API tokens of the web page.
- As a client (``client/``): the MCP servers the operator configures lend their tools to the
  agent, by intent, as untrusted text, each call under a deadline, restarted when they die.

``room.py`` builds both from typed collaborators (the composition root calls it once).
"""
