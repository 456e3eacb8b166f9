"""``groupcomm member-bench``: how many typing terminal editors one session server holds
(:mod:`.bench` the command, :mod:`.step` one step, :mod:`.load` a load process of
members), with the web capacity bench's steps, limits and pycrdt-websocket peer."""
