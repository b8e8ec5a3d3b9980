"""Models run on tasks across conditions: length generalization (``lengthgen``), ablations and
plane gating (``ablation``) and the gated training sweep (``gating_sweep``)."""
