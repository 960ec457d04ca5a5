"""Studies, items, annotators, assignments and annotations live here (annotation issue)."""
