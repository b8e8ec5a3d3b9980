"""The two papers psheads implements, and the numbers they report that psheads compares against.

Paper A introduces the positional/symbolic definitions, the exclusion principle, the per-frequency
analysis of pretrained LLMs and the canonical tasks; paper B the swap score, the number and letter
multi-hop tasks, the GPT-J training recipe, the theory constructions and length generalization.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    """A bibliographic reference.

    Attributes:
        key: how the docs and frames refer to it (``"A"``, ``"B"``).
        authors: author list.
        title: title.
        venue: where and when it appeared.
        url: where to read it.
    """

    key: str
    authors: str
    title: str
    venue: str
    url: str

    def citation(self) -> str:
        """One-line citation."""
        return f"{self.authors}. {self.title}. {self.venue}. {self.url}"


PAPER_A = Paper(
    key="A",
    authors="Felipe Urrutia, Jorge Salas, Alexander Kozachinskiy, Cristian Buc Calderon, Hector Pasten, "
            "Cristobal Rojas",
    title="Decoupling Positional and Symbolic Attention Behavior in Transformers",
    venue="International Conference on Learning Representations (ICLR) 2026; arXiv:2511.11579",
    url="https://arxiv.org/abs/2511.11579",
)

PAPER_B = Paper(
    key="B",
    authors="Felipe Urrutia, Juan José Alegría, Cinthia Sanchez Macias, Jorge Salas, Cristian B. Calderon, "
            "Cristobal Rojas",
    title="Positional versus Symbolic Attention Heads: Learning Dynamics, RoPE Geometry, and Length Generalization",
    venue="arXiv:2605.31558, 2026",
    url="https://arxiv.org/abs/2605.31558",
)

PAPER_B_FREQUENCY_ID: dict[str, list[int]] = {
    "number": [1, 2, 2, 2, 10, 39, 38, 38, 38, 37, 37, 38],
    "letter": [18, 32, 42, 37, 40, 38, 41, 38, 41, 39, 38, 40],
}
"""Paper B, table 1: frequency ID per layer (layers 0–11) of the trained number and letter models.
Paper B publishes no formula for it; psheads' usage-weighted mean is a different definition."""
