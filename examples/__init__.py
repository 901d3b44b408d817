"""Real consumers written with job libraries, tested as black boxes (docs/blackbox.md)."""
