"""Models psheads ships, builds or trains: the zoo of shipped and registry models and their
loaders (``zoo``), paper B's training recipe (``training``) and Theorem 3.1's constructions as
real models (``theory``). The shipped models' files are in ``pretrained/``."""
