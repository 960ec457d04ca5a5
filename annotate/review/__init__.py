"""Review and adjudication: a researcher's decision on one annotation (accept, reject with the
reason Prolific requires, or correct) and the gold label a disagreement is settled into
(docs/annotation.md, "Review and adjudication"; docs/agreement.md, "Reviewed annotations and
gold labels")."""
