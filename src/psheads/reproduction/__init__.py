"""The reproduction of both papers: their published values with sources (``references``) and the
report that sets each beside psheads' measurement with a verdict (``report``)."""
