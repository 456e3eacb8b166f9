"""The ``groupcomm`` command line: :mod:`~groupcomm.cli.main` dispatches the first word to
one module per subcommand group; :mod:`~groupcomm.cli.args` holds what they share."""
