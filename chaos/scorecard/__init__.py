"""The scorecard: a team's consumer through the whole fault catalogue, graded per property
(`python -m chaos scorecard`, docs/scorecard.md)."""
