"""Plugins: the built-in plugin, and the hook markers for third-party ones.

A package adds causality modules or extra filters by declaring an entry point in the
``groupcomm.plugins`` group that names a module implementing the hooks of
:mod:`groupcomm.core.hookspecs` with :data:`hookimpl`. The built-in modules are
registered the same way (:mod:`groupcomm.plugins.builtin`); the plugin manager that
loads them all is the registry, :mod:`groupcomm.core.registry`. A plugin states the
:data:`PLUGIN_API` version it was written against as ``GROUPCOMM_PLUGIN_API``; module
authors find the helpers in :mod:`groupcomm.module_kit` (docs/writing-a-module.md).
"""

from groupcomm.core.hookspecs import PLUGIN_API, PROJECT, hookimpl, hookspec

__all__ = ["PLUGIN_API", "PROJECT", "hookimpl", "hookspec"]
