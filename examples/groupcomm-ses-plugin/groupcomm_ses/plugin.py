"""The plugin groupcomm loads through the ``groupcomm.plugins`` entry point."""

from __future__ import annotations

from groupcomm.module_kit import CausalityModule, hookimpl
from groupcomm_ses.ses import SesForgetsPairsModule, SesModule

#: the plugin API this plugin is written against (groupcomm refuses an incompatible one)
GROUPCOMM_PLUGIN_API = (2, 0)


@hookimpl
def groupcomm_causality_modules() -> list[type[CausalityModule]]:
    return [SesModule, SesForgetsPairsModule]
