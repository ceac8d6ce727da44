"""pytest-prove's configuration, shared by both front doors (pytest and ``pytest-prove``).

Nothing here imports pytest or the plugin, so that the command line reads a project's
settings exactly as a session does:

- ``values``: each option's and ini value's parser (the ``type=`` callables), with its range;
- ``ini``: the one table of the ``prove_*`` ini values: name, help, default and parser (the
  plugin registers and reads them from it, the command line fills its defaults from it);
- ``project``: the project's configuration file, found and read the way pytest finds it;
- ``paths``: what pytest takes for a path on its command line (the separate form of an
  option's value it would read as a test path, a session's paths relative to its rootdir).
"""
