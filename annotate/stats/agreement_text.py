"""The words of the agreement report (``agreement.py``): what every denominator counts and
every tie rule does (``DENOMINATORS``, the report's ``denominators``) and how its intervals
are made (``BOOTSTRAP_METHOD``, the text of the report's ``bootstrap``). Kept apart from the
computation so the numbers and their explanation are each read in one place."""

from __future__ import annotations

from annotate import constants as C

DENOMINATORS: dict[str, str] = {
    "n_items": "distinct item_id values with at least one counted annotation (not excluded, not surplus, not "
    "flagged broken)",
    "n_annotators": "distinct annotators with at least one counted annotation",
    "n_annotations": (
        "counted annotation rows; rows with excluded=true are counted in n_excluded, rows with surplus=true "
        "(a late submit into an item that already had its k counted annotations) in n_surplus, and both are "
        "used nowhere (a row that is both is counted once, in n_excluded); rows the annotator flagged "
        "'This item is broken' (no label) in n_broken, used nowhere either; n_unsure counts the counted rows "
        "flagged 'I'm unsure', which stay in every statistic; an annotation a researcher rejected in review is "
        "excluded (n_excluded) and one corrected in review counts with the correction; the study page's pilot "
        "rounds and the rounds API give the same counts (annotation_counts)"
    ),
    "alpha": (
        "Krippendorff's alpha over items with at least two counted annotations (alpha_details.n_units); "
        "items with one annotation cannot be paired and are counted in alpha_details.n_single; null when no "
        "item has two annotations or the paired values never vary"
    ),
    "alpha.first_failure_location": (
        "nominal over 'none' (no failure reported), the smallest linked L2 step, or 'unlocated' "
        "(failures reported, no L2 step linked)"
    ),
    "alpha.l2_step_sets_masi": "the union of linked L2 steps per annotation; MASI distance, 0 between two empty sets",
    "alpha_ci95": (
        "95% BCa bootstrap (Efron 1987) resampling the pairable items with replacement (the same resamples for the "
        "three kinds), the acceleration from the jackknife over those items (up to 2,000 of them; bias-corrected "
        "percentile above); resamples where alpha is undefined are left out and counted in "
        "alpha_details.n_bootstrap_undefined; null when every resample gives the same alpha (a zero-width interval, "
        "see alpha_ci95_not_estimable); at perfect agreement (every pairable item agrees) the Wilson bound of the "
        "disagreement share mapped through 1 - D_o / D_e instead; alpha_interval names the method and marks it "
        "approximate below 100 items"
    ),
    "alpha_ci95_not_estimable": (
        "per kind: null, or 'interval not estimable (n = N): ...' when every bootstrap resample of the N pairable "
        "items gives the same alpha (too few items to vary), so alpha_ci95 is null rather than a zero-width interval"
    ),
    "human_majority": (
        "strict majority (more than half) of an item's counted has_failure labels, for items with at least "
        "min_annotations (default 2, never fewer) of them: one annotation is a label, not a majority; items with "
        "fewer are counted in n_too_few and left out of judge agreement, leave-one-out and calibration; an even "
        "split is a tie, has no majority and is counted in n_ties; "
        "n_items = n_with_majority + n_ties + n_too_few and n_with_majority = has_failure + no_failure"
    ),
    "leave_one_out": (
        "per annotator: agreement = matches / n, n = their items where the OTHER annotators, at least "
        "min_annotations of them, have a strict majority; items where the others tie (n_others_tie), number fewer "
        "than min_annotations (n_others_too_few) or nobody else labelled it (n_no_others) are left out; ci95 is the "
        "95% Wilson score interval over the n items (interval, interval_name, approximate)"
    ),
    "judges": (
        "agreement = matches / n, n = items with a human majority and a label from this judge; "
        "agreement_has_failure and agreement_no_failure divide by n_has_failure and n_no_failure (the human "
        "majority class); judged items with a human tie (n_human_tie), with fewer than min_annotations "
        "annotations (n_too_few_annotations) or without annotations (n_no_human_labels) are left out, so "
        "n_judged = n + n_human_tie + n_too_few_annotations + n_no_human_labels; ci95 is the 95% Wilson score "
        "interval of agreement over the n items, ci95_has_failure and ci95_no_failure over the items of that class "
        "(a share is never bootstrapped); cohen_kappa_ci95 is a 95% BCa bootstrap over the n items "
        "(cohen_kappa_interval names it; null with the reason in cohen_kappa_ci95_not_estimable when every "
        "resample gives the same kappa); confusion rows are the human majority, columns the judge"
    ),
    "judge_pairs": (
        "agreement = equal labels / n, n = items both judges labelled (annotations not needed); every pair of "
        "judges, keys 'A|B' with the names sorted; ci95 is the 95% Wilson score interval over the n items"
    ),
    "annotator_pairs": (
        "agreement = equal labels / n, n = items both annotators labelled (counted labels); only pairs with n > 0; "
        "ci95 is the 95% Wilson score interval over the n items"
    ),
    "alpha_undefined": "per kind: null when alpha is defined, otherwise the sentence saying why it is not",
    "alpha_small_sample": "per kind: the small-sample note of alpha over its n_units items and its interval, or null",
    "small_sample": (
        f"a number resting on fewer than {C.SMALL_SAMPLE_ITEMS} items, or whose 95% interval is wider than "
        f"{C.WIDE_INTERVAL}, is shown with a note that its interval is wide"
    ),
    "calibration": (
        "Rogan-Gladen with positive class success = no_failure: corrected_score = (observed_score + tnr - 1) / "
        "(tpr + tnr - 1) clipped to [0, 1]; tpr = judge no_failure among human-majority no_failure (n_positive), "
        "tnr = judge has_failure among human-majority has_failure (n_negative), observed_score = the judge's "
        "no_failure fraction over all n_target (= n_unlabelled) items it judged; null when tpr + tnr - 1 <= 0 or a "
        "class is missing; only items with a human majority (see human_majority) give tpr and tnr (n_labelled); ci95 "
        "is the central 95% interval of the Jeffreys posteriors of tpr, tnr and the observed score restricted to "
        "tpr + tnr > 1 and a corrected score in [0, 1] (weighted Monte Carlo, `draws` draws, ci95_mc_se its Monte "
        "Carlo error), never clipped. ppi_score / ppi_ci95 (details in ppi): stratified PPI++ of the human "
        "no_failure share of the judged items from the n_labelled items with a human majority (Y) and the judge's "
        "labels on all n_unlabelled judged items (f), strata = item topics (ppi.strata, merged strata in "
        "ppi.pooled_because), Student-t 95% interval (ppi.df degrees of freedom) with an Agresti-Coull variance floor. Every score and interval "
        "is on 0-1 with a _percent sibling on 0-100"
    ),
    "null": "a rate whose denominator is 0, or a statistic that is undefined, is null",
}


# The report's ``bootstrap`` block beside the resamples and the seed.
BOOTSTRAP_METHOD: dict[str, str] = {
    "interval": (
        "95% BCa (Efron 1987) for the statistics without a closed form (alpha, Cohen's kappa); shares and "
        "rates (agreement, per class, leave-one-out, pairs) carry the 95% Wilson score interval (Wilson "
        "1927) whatever the resamples; every interval names its method (interval, interval_name)"
    ),
    "resampling": "items with replacement (calibration draws from posteriors instead: see denominators.calibration)",
}
