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

PAPER_B_TABLE_3: dict[str, dict[int, float]] = {
    "number": dict(zip((12, 16, 24, 32, 48, 64, 80, 100, 200, 300),
                       (0.98, 0.87, 0.73, 0.45, 0.17, 0.14, 0.10, 0.08, 0.08, 0.06))),
    "letter": dict(zip((12, 16, 24, 32, 48, 64, 80, 100, 200, 300),
                       (0.96, 0.98, 1.0, 0.99, 0.99, 0.98, 0.96, 0.85, 0.52, 0.40))),
}
"""Paper B, table 3: GPT 5.4's mean accuracy on the 1-hop number and letter tasks by target-window size
(GPT 5.5 and Claude Sonnet 3.7 show the same split: number 0.55 and 0.40 at 12 falling to 0.04 and
0.05 at 300; letter 0.87 and 0.92 at 12, 0.50 and 0.80 at 300)."""

PAPER_B_FREQUENCY_ID: dict[str, list[int]] = {
    "number": [1, 2, 2, 2, 10, 39, 38, 38, 38, 37, 37, 38],
    "letter": [18, 32, 42, 37, 40, 38, 41, 38, 41, 39, 38, 40],
}
"""Paper B, table 1: frequency ID per layer (layers 0–11) of the trained number and letter models.
Paper B publishes no formula for it; psheads' usage-weighted mean is a different definition."""


@dataclass(frozen=True)
class Published:
    """A result one of the papers reports, as the reproduction report quotes it.

    Attributes:
        paper: ``PAPER_A`` or ``PAPER_B``.
        source: where in the paper (table or figure).
        claim: the result in words.
        value: the number(s) as published (None for a qualitative claim).
    """

    paper: Paper
    source: str
    claim: str
    value: object = None


PUBLISHED: dict[str, Published] = {
    "number_hop_by_hop": Published(PAPER_B, "figure 2", "the number task is learned hop by hop: 1 hop first, "
                                   "then 2, 3 and 4"),
    "letter_at_once": Published(PAPER_B, "figure 2", "the letter task learns every hop count nearly at once"),
    "number_positional_l0_l3": Published(PAPER_B, "figure 2C (red lines)", "number model: pure positional heads "
                                         "appear in layers 1, 0, 2 and 3, in that order (steps ~2,400–4,500)",
                                         (1, 0, 2, 3)),
    "number_symbolic_l4_l11": Published(PAPER_B, "figure 2C (green lines)", "number model: pure symbolic heads appear "
                                        "from layer 5 outwards (L5 → L6/L7 → L4/L8 → L9/L10 → L11, steps "
                                        "~2,700–3,000)", (5, 6, 7, 4, 8, 9, 10, 11)),
    "letter_symbolic_1_11": Published(PAPER_B, "figure 2C", "letter model: layers 1–11 become pure symbolic, and no "
                                      "layer pure positional", tuple(range(1, 12))),
    "index_flow": Published(PAPER_B, "§3.2, figure 3A and listing 1", "the number model computes Reflexive ∘ "
                            "Index^h: layer 0 at the last integer of the path attends to the answer's symbol and "
                            "copies it, the positional layers follow the Index hops, and the later layers only "
                            "propagate", {"last_step": (0,), "index": (1, 2, 3), "propagate": tuple(range(4, 12))}),
    "purity_gamma": Published(PAPER_B, "figure 7", "the cumulative counts of pure heads keep their shape for "
                              "γ = 0.1 and γ = 0.05 (a small shift)"),
    "pure_before_convergence": Published(PAPER_B, "figure 2A–C (timing)", "accuracy converges only once the "
                                         "heads have become pure"),
    "entropy_at_init": Published(PAPER_B, "§3.1", "attention entropy is high at initialisation"),
    "frequency_id_number": Published(PAPER_B, "table 1 (figure 8 per plane)", "number model, frequency ID per "
                                     "layer: fast planes in the positional layers 0–4, slow planes from layer 5",
                                     PAPER_B_FREQUENCY_ID["number"]),
    "frequency_id_letter": Published(PAPER_B, "table 1 (figure 8 per plane)", "letter model, frequency ID per "
                                     "layer: slow planes throughout (18 in layer 0, 32–42 after)",
                                     PAPER_B_FREQUENCY_ID["letter"]),
    "letter_length": Published(PAPER_B, "figure 5B", "the letter model stays above 90% accuracy up to ≈850 tokens "
                               "(53× the training length)", 850),
    "number_length": Published(PAPER_B, "figure 5B (read from the plot)", "the number model barely generalises "
                               "beyond its training length: accuracy ≈0.64 at 200 tokens and ≈0.2 at 1,000",
                               {200: 0.64, 1000: 0.2}),
    "theory_decay": Published(PAPER_B, "§3.6 (figure 5A against 5B)", "the qualitative patterns of decay in the "
                              "trained models' length generalization closely resemble Theorem 3.2's bounds at their "
                              "angles"),
    "margins": Published(PAPER_B, "figure 5", "positional heads' discrepancy shrinks to zero with length, symbolic "
                         "heads' stays positive"),
    "theorem_3_1": Published(PAPER_B, "theorem 3.1", "one head on one RoPE plane solves Index (positional) and "
                             "Retrieval (symbolic) exactly up to a length n0"),
    "theorem_3_2": Published(PAPER_B, "theorem 3.2", "the discrepancy of those constructions lies between "
                             "closed-form bounds"),
    "layer_1_geometry": Published(PAPER_B, "figure 4B–C (with figure 3A's distance)", "number model, layer 1: on its "
                                  "dominant plane (figure 4C's ID 1 by the per-plane maximum logit; that figure counts "
                                  "from 0, so psheads' plane 2) the keys are aligned and the query is rotated onto the "
                                  "key at the target position (distance 2 at the last token, figure 3A), as in "
                                  "Theorem 3.1's Index construction", {"plane": 2, "distance": 2}),
    "figure_5a": Published(PAPER_B, "figure 5A", "Theorem 3.2's bounds for n ≤ 100 at the angles of each trained "
                           "model's second layer: θ₂ = 0.8 (Index, frequency ID 2) falls towards 0, θ₄₂ = 0.0027 with "
                           "|ALPH| = 8 (Retrieval, frequency ID 42) stays bounded away from 0",
                           {"index": (0.8, 2), "retrieval": (0.0027, 42)}),
    "index_fast": Published(PAPER_A, "canonical tasks, gated training", "Index needs rotating (fast) planes"),
    "retrieval_slow": Published(PAPER_A, "canonical tasks, gated training", "Retrieval is solved from slow or zero "
                                "frequencies"),
    "induction_both": Published(PAPER_A, "canonical tasks, gated training", "partial induction needs rotating and "
                                "static planes together"),
    "llm_table_3": Published(PAPER_B, "table 3", "frontier LLMs on the 1-hop tasks: the number task collapses by "
                             "windows of 32–100 items while the letter task holds (GPT 5.4: number 0.98 at 12, 0.08 at "
                             "100; letter 0.96 at 12, 0.85 at 100)", PAPER_B_TABLE_3),
    "llm_early_late": Published(PAPER_A, "gemma-2-2b-it analysis", "median positional score is higher in the first "
                                "half of the layers than in the second", (0.83, 0.56)),
    "llm_correlation": Published(PAPER_A, "gemma-2-2b-it analysis", "positional and symbolic scores are "
                                 "anti-correlated across heads", -0.91),
}
"""Every published number the reproduction report (``psheads.reproduction.report``) puts beside a measurement."""
