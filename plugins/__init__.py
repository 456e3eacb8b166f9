"""Plugins: the built-in plugin, and the hook markers for third-party ones.

A package adds causality modules or extra filters by declaring an entry point in the
``groupcomm.plugins`` group that names a module implementing the hooks of
:mod:`groupcomm.plugins.hookspecs` with :data:`hookimpl`. The built-in modules are
registered the same way (:mod:`groupcomm.plugins.builtin`); the plugin manager that
loads them all is the registry, :mod:`groupcomm.core.registry`.
"""

from groupcomm.plugins.hookspecs import PROJECT, hookimpl, hookspec

__all__ = ["PROJECT", "hookimpl", "hookspec"]
