"""The researchers' reports of a study: the agreement dashboards (per round, annotators,
disagreements item by item) and which metric agrees with people. Selectors read the database
and call the pure statistics of ``annotate.stats``; views and charts only present them."""
