"""The ``railgang`` command line, in one room: ``main.py`` wires the root command and lists every
component's sub-app (``lazy.py`` imports each only when its command runs); ``entry.py`` is the
executable, which answers a TAB from ``complete.py`` and ``completion.json`` before typer is
imported; ``common.py`` is what every command shares (settings, ``--json``, exit codes);
``docs.py`` writes the man page and the completion table. The other files are the commands that
belong to no component of their own (``db``, ``paths``, ``queue``, ``quota``, ``token``, ``top``,
``topology``/``place``); a component with a room of its own keeps its commands there
(``api/cli.py``, ``ledger/cli.py``, ``report/cli.py``, ``serving/cli.py``, ``sim/cli.py``).

Nothing is imported here: a TAB must not pay for typer (tests/daemon/test_cli_docs.py)."""
