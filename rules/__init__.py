"""rules: the rewrite rules as data. Each X.rules is compiled by `python build.py` into the X.py beside it
(generated, committed, never edited by hand); a few small hand-written helper modules hold longer actions."""
