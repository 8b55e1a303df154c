"""What a method produces: candidate source plus provenance, content-addressed by hash."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


class MethodUnavailable(Exception):
    """The method has no candidate for this task (e.g. a directory without the file)."""


@dataclass(frozen=True)
class Candidate:
    source: str
    method: str
    model: str = "none"
    provenance: dict = field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        return "sha256:" + hashlib.sha256(self.source.encode()).hexdigest()
