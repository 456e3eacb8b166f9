"""The hooks of groupcomm plugins, for plugins to import (``hookimpl``).

The specifications are :mod:`groupcomm.core.hookspecs`, next to the registry (the
pluggy plugin manager, :mod:`groupcomm.core.registry`) that calls them; this module
re-exports them under the name plugins have always used.
"""

from groupcomm.core.hookspecs import (
    PLUGIN_API,
    PROJECT,
    groupcomm_causality_modules,
    groupcomm_filters,
    hookimpl,
    hookspec,
)

__all__ = ["PLUGIN_API", "PROJECT", "groupcomm_causality_modules", "groupcomm_filters", "hookimpl",
           "hookspec"]
