"""Operation-based replicated types on tagged causal delivery, with no I/O: each
operation is applied with its message's tag, and the editor replica every editor of the
text keeps. Usage, rules, and the modules that carry them: docs/replicated.md."""

from groupcomm.replicated.editor import EditorReplica
from groupcomm.replicated.stability import Stability
from groupcomm.replicated.support import supported_modules, unsupported_reason
from groupcomm.replicated.text import TextSequence
from groupcomm.replicated.types import AddWinsSet, Counter, MultiValueRegister

__all__ = ["AddWinsSet", "Counter", "EditorReplica", "MultiValueRegister", "Stability",
           "TextSequence", "supported_modules", "unsupported_reason"]
