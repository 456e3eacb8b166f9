"""groupcomm-ses-plugin: the Schiper-Eggli-Sandoz causality module (``ses``) and a
known-bad variant of it (``ses-forgets-pairs``), as a third-party groupcomm plugin."""

from groupcomm_ses.ses import SesForgetsPairsModule, SesModule

__all__ = ["SesForgetsPairsModule", "SesModule"]
