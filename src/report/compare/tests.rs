use super::*;

fn row(id: &str, be: f64, se: Option<f64>) -> CellRow {
    CellRow {
        cell_id: id.into(),
        kind: "scheme".parse().unwrap(),
        dataset: "dolly".parse().unwrap(),
        temp_set: "1".parse().unwrap(),
        seed: 1,
        scheme: "is".parse().unwrap(),
        prompts: 4,
        block_efficiency_mean: be,
        block_efficiency_se: se,
        token_rate_mean: 100.0,
        token_rate_se: Some(5.0),
        ..CellRow::default()
    }
}

fn target(rate: f64, se: Option<f64>) -> CellRow {
    CellRow {
        cell_id: "dolly/target/seed1".into(),
        kind: "target".parse().unwrap(),
        scheme: "target".parse().unwrap(),
        temp_set: "-".parse().unwrap(),
        token_rate_mean: rate,
        token_rate_se: se,
        ..row("", 1.0, Some(0.0))
    }
}

fn results(rows: Vec<CellRow>) -> Results {
    Results {
        rows,
        generations: Vec::new(),
        sources: Vec::new(),
        duplicates: 0,
    }
}

fn only(metrics: &[Metric]) -> CompareOptions {
    CompareOptions {
        metrics: metrics.to_vec(),
        ..CompareOptions::default()
    }
}

#[test]
fn unpaired_drops_are_judged_by_size_and_significance() {
    let options = CompareOptions {
        z: 2.0,
        ..only(&[Metric::BlockEfficiency])
    };
    let base = results(vec![row("a", 2.0, Some(0.01)), row("b", 2.0, Some(0.5))]);
    let new = results(vec![row("a", 1.8, Some(0.01)), row("b", 1.8, Some(0.5))]);
    let c = compare(&base, &new, &options).unwrap();
    // a: −10% with se √2·0.5% → regressed; b: −10% ± 35% → noise.
    assert!((c.cells[0].change_pct + 10.0).abs() < 1e-12);
    let se = c.cells[0].se_pct.unwrap();
    assert!((se - 100.0 * 0.01f64.hypot(0.01) / 2.0).abs() < 1e-12);
    assert!(c.cells[0].regressed);
    assert!(!c.cells[1].regressed);
    assert_eq!(c.cells[1].verdict, Verdict::Ok);
    assert_eq!(c.cells[0].method, Method::CellStandardErrors);
    // Pooled: mean −10%, se = √(se_a² + se_b²) / 2.
    let pooled = &c.pooled[0];
    assert!((pooled.change_pct + 10.0).abs() < 1e-12);
    let expected = c.cells[0].se_pct.unwrap().hypot(c.cells[1].se_pct.unwrap()) / 2.0;
    assert!((pooled.se_pct.unwrap() - expected).abs() < 1e-12);
    assert!(!pooled.regressed, "z = {:?}", pooled.z);
    assert_eq!(c.regressions(), vec!["cell a (block_efficiency)"]);
    // Below --max-drop nothing regresses, however significant.
    let lenient = CompareOptions {
        max_drop_pct: 20.0,
        ..options
    };
    assert!(!compare(&base, &new, &lenient).unwrap().regressed());
}

#[test]
fn no_standard_error_is_not_judged_unless_strict() {
    let base = results(vec![row("a", 2.0, None)]);
    let new = results(vec![row("a", 1.0, None)]);
    let c = compare(&base, &new, &only(&[Metric::BlockEfficiency])).unwrap();
    assert_eq!(c.cells[0].verdict, Verdict::NoNoiseEstimate);
    assert_eq!(c.pooled[0].verdict, Verdict::NoNoiseEstimate);
    assert!(!c.regressed());
    assert!(render_text(&c).contains("not judged: no noise estimate"));
    let strict = CompareOptions {
        strict: true,
        ..only(&[Metric::BlockEfficiency])
    };
    let c = compare(&base, &new, &strict).unwrap();
    assert_eq!(c.cells[0].verdict, Verdict::Regressed);
    assert!(c.regressed());
}

#[test]
fn speedup_is_over_the_runs_own_target_only_cell() {
    // NEW: the whole machine 10% slower; the scheme's rate over the
    // target's does not move, the raw rate does.
    let a = CellRow {
        token_rate_se: Some(1.0),
        ..row("a", 2.0, Some(0.1))
    };
    let base = results(vec![target(50.0, Some(1.0)), a]);
    let mut slower = base.clone();
    for r in &mut slower.rows {
        r.token_rate_mean /= 1.1;
        r.token_rate_se = r.token_rate_se.map(|s| s / 1.1);
    }
    let c = compare(&base, &slower, &CompareOptions::default()).unwrap();
    assert_eq!(c.reported, vec![Metric::TokenRate]);
    let speedup = c
        .cells
        .iter()
        .find(|c| c.metric == Metric::Speedup)
        .unwrap();
    assert_eq!(speedup.name, "a");
    assert_eq!(speedup.reference.as_deref(), Some("dolly/target/seed1"));
    assert!((speedup.base - 2.0).abs() < 1e-12);
    assert!(speedup.change_pct.abs() < 1e-9, "{speedup:?}");
    assert_eq!(speedup.verdict, Verdict::Ok);
    // No speed-up of the reference itself.
    assert_eq!(
        c.cells
            .iter()
            .filter(|c| c.metric == Metric::Speedup)
            .count(),
        1
    );
    let rate = c
        .cells
        .iter()
        .find(|c| c.metric == Metric::TokenRate && c.name == "a")
        .unwrap();
    assert!(rate.change_pct < -9.0 && rate.verdict == Verdict::Reported);
    assert!(!c.regressed());
    // Judged as a raw rate, the same change is a regression.
    let raw = compare(&base, &slower, &only(&[Metric::TokenRate])).unwrap();
    assert!(raw.regressed(), "{}", render_text(&raw));
    assert!(raw.reported.is_empty());

    // Only the scheme 10% slower: its speed-up drops 10%, with the cells'
    // relative errors in quadrature: 2 · √(0.01² + 0.02²) in BASE,
    // 1.8 · √((0.9/90)² + 0.02²) in NEW.
    let mut scheme = base.clone();
    scheme.rows[1].token_rate_mean = 90.0;
    scheme.rows[1].token_rate_se = Some(0.9);
    let c = compare(&base, &scheme, &only(&[Metric::Speedup])).unwrap();
    let speedup = &c.cells[1];
    assert_eq!(speedup.metric, Metric::Speedup);
    assert!((speedup.change_pct + 10.0).abs() < 1e-9, "{speedup:?}");
    let (se_base, se_new) = (2.0 * 0.01f64.hypot(0.02), 1.8 * 0.01f64.hypot(0.02));
    let se = 100.0 * se_base.hypot(se_new) / 2.0;
    assert!((speedup.se_pct.unwrap() - se).abs() < 1e-9, "{speedup:?}");
    assert_eq!(speedup.method, Method::CellStandardErrors);
    assert_eq!(speedup.verdict, Verdict::Regressed);
}

#[test]
fn the_spread_across_cells_floors_a_cells_timing_error() {
    // Six cells whose token rates moved by timing, each with a tiny error of
    // its own: the spread across cells is the noise, and −30% is within it.
    let cell = |id: &str, rate: f64| CellRow {
        token_rate_mean: rate,
        token_rate_se: Some(0.1),
        ..row(id, 2.0, Some(0.1))
    };
    let ids = ["a", "b", "c", "d", "e", "f"];
    let base = results(ids.iter().map(|id| cell(id, 100.0)).collect());
    let moved = [0.0, 10.0, -10.0, 20.0, -20.0, -30.0];
    let new = results(
        ids.iter()
            .zip(moved)
            .map(|(id, m)| cell(id, 100.0 + m))
            .collect(),
    );
    let options = only(&[Metric::TokenRate]);
    let c = compare(&base, &new, &options).unwrap();
    // Median −5, absolute deviations 25 15 5 5 15 25: MAD 15.
    assert_eq!(c.spread.len(), 1);
    assert!((c.spread[0].spread_pct - 1.4826 * 15.0).abs() < 1e-9);
    let methods: Vec<Method> = c.cells.iter().map(|c| c.method).collect();
    assert_eq!(methods[0], Method::Identical); // unmoved: keeps its exact zero
    assert!(
        methods[1..].iter().all(|m| *m == Method::Spread),
        "{methods:?}"
    );
    assert!(!c.regressed(), "{}", render_text(&c));
    // One cell far outside the others' spread is still found.
    let moved = [0.0, 1.0, -1.0, 2.0, -2.0, -60.0];
    let new = results(
        ids.iter()
            .zip(moved)
            .map(|(id, m)| cell(id, 100.0 + m))
            .collect(),
    );
    let c = compare(&base, &new, &options).unwrap();
    let regressions = c.regressions();
    assert_eq!(regressions[0], "cell f (token_rate)");
    assert!(regressions[1..].iter().all(|r| r.contains("pooled")));
    // Block efficiency is not timing: no floor.
    let c = compare(&base, &new, &only(&[Metric::BlockEfficiency])).unwrap();
    assert!(c.spread.is_empty());
}

#[test]
fn cells_sharing_a_reference_pool_as_one() {
    // Two cells of one scheme over one target-only cell: its timing noise
    // is in both, so their errors add instead of adding in quadrature.
    let cell = |id: &str, rate: f64| CellRow {
        token_rate_mean: rate,
        token_rate_se: Some(1.0),
        ..row(id, 2.0, Some(0.1))
    };
    let base = results(vec![
        target(50.0, Some(1.0)),
        cell("a", 100.0),
        cell("b", 100.0),
    ]);
    let new = results(vec![
        target(50.0, Some(1.0)),
        cell("a", 90.0),
        cell("b", 90.0),
    ]);
    let c = compare(&base, &new, &only(&[Metric::Speedup])).unwrap();
    let cells: Vec<&Change> = c
        .cells
        .iter()
        .filter(|c| c.metric == Metric::Speedup)
        .collect();
    let pooled = c
        .pooled
        .iter()
        .find(|c| c.metric == Metric::Speedup)
        .unwrap();
    let sum = cells[0].se_pct.unwrap() + cells[1].se_pct.unwrap();
    assert!(
        (pooled.se_pct.unwrap() - sum / 2.0).abs() < 1e-12,
        "{pooled:?}"
    );
    // The raw token rate has no reference: independent cells.
    let rate = c
        .pooled
        .iter()
        .find(|c| c.metric == Metric::TokenRate && c.name == "is")
        .unwrap();
    let rates: Vec<f64> = c
        .cells
        .iter()
        .filter(|c| c.metric == Metric::TokenRate && c.name != "dolly/target/seed1")
        .map(|c| c.se_pct.unwrap())
        .collect();
    assert!((rate.se_pct.unwrap() - rates[0].hypot(rates[1]) / 2.0).abs() < 1e-12);
}

#[test]
fn a_missing_reference_is_said_and_not_judged() {
    let base = results(vec![target(50.0, Some(1.0)), row("a", 2.0, Some(0.1))]);
    let new = results(vec![row("a", 2.0, Some(0.1))]);
    let c = compare(&base, &new, &only(&[Metric::Speedup])).unwrap();
    let speedup = &c.cells[0];
    assert_eq!(
        (speedup.metric, speedup.verdict),
        (Metric::Speedup, Verdict::NoReference)
    );
    assert!(speedup.base.is_nan());
    let text = render_text(&c);
    assert!(
        text.contains("not judged: no reference cell: dolly/target/seed1 is not in NEW"),
        "{text}"
    );
    assert!(c.pooled.iter().all(|p| p.metric != Metric::Speedup));
    assert!(!c.regressed());
    // SD as the reference: the SD cell of the group is missing in both.
    let c = compare(&base, &base, &only(&[Metric::SpeedupVsSd])).unwrap();
    let speedup = &c.cells[1];
    assert_eq!(speedup.verdict, Verdict::NoReference);
    assert!(
        speedup
            .note
            .as_deref()
            .unwrap()
            .contains("dolly/1/K1/single/seed1"),
        "{speedup:?}"
    );
    assert!(!c.regressed());
    // JSON has no NaN: the missing values are null.
    let json = serde_json::to_value(&c).unwrap();
    assert!(json["cells"][1]["base"].is_null());
}

#[test]
fn equal_cells_are_identical_and_bad_input_is_refused() {
    let base = results(vec![row("a", 2.0, Some(0.1))]);
    let c = compare(&base, &base, &only(&[Metric::BlockEfficiency])).unwrap();
    assert!(c.cells.iter().all(|c| c.method == Method::Identical));
    assert!(!c.regressed());
    let other = results(vec![row("z", 2.0, Some(0.1))]);
    let message = compare(&base, &other, &CompareOptions::default())
        .unwrap_err()
        .to_string();
    assert!(message.contains("no cell in common"), "{message}");
    assert!(Metric::parse_list("block_efficiency,speed").is_err());
    assert_eq!(
        Metric::parse_list("token_rate, token_rate").unwrap(),
        vec![Metric::TokenRate]
    );
    assert_eq!(
        Metric::parse_list("speedup_vs_sd").unwrap(),
        vec![Metric::SpeedupVsSd]
    );
}
