"""Result frames: the schema every frame is declared in (``schema``), frames on disk with their
provenance (``files``), and pure summaries of score frames and learning dynamics (``analysis``)."""
