"""Where every part of the embedded stack listens.

Default layout (no base port): the Temporal dev server keeps its usual 7233 (gRPC) and 8233 (UI);
our services sit at 8700-8711. With a base port B, every port is B plus a fixed offset, so a
second stack on another base never collides with the first.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# offset from the base port, per part
_OFFSETS = {
    "gateway": 0,
    "coordinator": 1,
    "moto": 2,
    "boundary_control": 10,
    "boundary_workload": 11,
    "temporal": 20,
    "temporal_ui": 21,
}
_DEFAULTS = {
    "gateway": 8700,
    "coordinator": 8701,
    "moto": 8702,
    "boundary_control": 8710,
    "boundary_workload": 8711,
    "temporal": 7233,
    "temporal_ui": 8233,
}


@dataclass(frozen=True)
class StackPorts:
    gateway: int
    coordinator: int
    moto: int
    boundary_control: int
    boundary_workload: int
    temporal: int
    temporal_ui: int

    @classmethod
    def layout(cls, base_port: int | None = None) -> StackPorts:
        if base_port is None:
            return cls(**_DEFAULTS)
        return cls(**{name: base_port + offset for name, offset in _OFFSETS.items()})

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
