"""Measurements of one model on a prompt set: head scores (``scoring``, with the methods of
``methods``), frequency usage (``frequency_profile``), worst-case answer margins
(``discrepancy``) and task accuracy (``evaluation``), on one engine (``engine``) over prepared
prompts (``prompts``)."""
