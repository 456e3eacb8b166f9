"""Plugins: pluggy hook specifications and the registration of the built-in modules.

Third-party packages add causality modules or extra filters by declaring an entry point
in the ``groupcomm.plugins`` group that names a module implementing the hooks of
:mod:`groupcomm.plugins.hookspecs` with :data:`hookimpl`.
"""

from groupcomm.plugins.hookspecs import PROJECT, hookimpl, hookspec

__all__ = ["PROJECT", "hookimpl", "hookspec"]
