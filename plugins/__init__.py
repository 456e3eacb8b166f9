"""Plugins: the built-in plugin (:mod:`groupcomm.plugins.builtin`), and the hook markers
for third-party ones (docs/writing-a-module.md)."""

from groupcomm.core.hookspecs import PLUGIN_API, PROJECT, hookimpl, hookspec

__all__ = ["PLUGIN_API", "PROJECT", "hookimpl", "hookspec"]
