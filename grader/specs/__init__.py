"""One module per exercise, `exNN_name.py`, each defining SPEC; shared spec code beside them."""
