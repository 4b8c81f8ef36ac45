//! Each scheme's mean per-node acceptance beside the optimum `P*` for the
//! same nodes: bars for the acceptance, a black tick at `P*`, and the ratio
//! written after each bar. The gap to the optimum is this bench's own
//! measurement (the paper reports acceptance only for its IS scheme).

use crate::data::Dataset;
use crate::experiment::cell::CellKind;
use crate::experiment::metrics::CellRow;

use super::Skip;
use super::data::{KGroup, by_temp_set, in_order, seeds_note, settings, split_by_k, stat};
use super::figure::{Bar, Body, Figure, Panel};
use super::style::scheme_style;
use crate::select::{DraftLaw, SCHEMES};

pub fn acceptance_figures(rows: &[CellRow], skipped: &mut Vec<Skip>) -> Vec<Figure> {
    let cells: Vec<&CellRow> = rows
        .iter()
        .filter(|r| r.kind != CellKind::Target && r.mean_accept.is_some())
        .collect();
    if cells.is_empty() {
        skipped.push(Skip::new("accept-vs-pstar", "no cell recorded mean_accept"));
        return Vec::new();
    }
    let mut figures = Vec::new();
    for dataset in in_order(cells.iter().map(|r| r.dataset)) {
        let in_dataset: Vec<&CellRow> = cells
            .iter()
            .copied()
            .filter(|r| r.dataset == dataset)
            .collect();
        let without: Vec<String> = in_order(
            rows.iter()
                .filter(|r| {
                    r.dataset == dataset && r.kind != CellKind::Target && r.mean_accept.is_none()
                })
                .map(|r| r.scheme_label()),
        );
        for group in split_by_k(&in_dataset) {
            let mut figure = acceptance_figure(&dataset, &group);
            if !without.is_empty() {
                figure.caption.push_str(&format!(
                    " Not shown (no per-node acceptance recorded): {}.",
                    without.join(", ")
                ));
            }
            figures.push(figure);
        }
    }
    figures
}

/// What one panel's bars leave for the caption.
#[derive(Default)]
struct Seen {
    /// The most seeds behind one bar.
    seeds: usize,
    /// Some bar has no `P*` to compare with.
    missing_pstar: bool,
}

/// One bar per scheme and K: its mean acceptance, `P*` as a tick.
fn bars(group: &KGroup, here: &[&CellRow], seen: &mut Seen) -> Vec<Bar> {
    let mut bars = Vec::new();
    for (label, k) in in_order(here.iter().map(|r| (r.scheme_label(), r.k))) {
        let cells: Vec<&CellRow> = here
            .iter()
            .copied()
            .filter(|r| r.scheme_label() == label && r.k == k)
            .collect();
        let accept: Vec<f64> = cells.iter().filter_map(|r| r.mean_accept).collect();
        let pstar: Vec<f64> = cells.iter().filter_map(|r| r.mean_pstar).collect();
        let a = stat(&accept).expect("filtered on mean_accept");
        seen.seeds = seen.seeds.max(a.n);
        let p = if pstar.len() == cells.len() {
            stat(&pstar)
        } else {
            None
        };
        seen.missing_pstar |= p.is_none();
        let note = match p {
            Some(p) => format!("{:.3} = {:.1}% of P*", a.mean, 100.0 * a.mean / p.mean),
            None => format!("{:.3} (P* not computed)", a.mean),
        };
        bars.push(Bar {
            label: group.label(cells[0]),
            style: scheme_style(&label),
            value: a.mean,
            err: a.se,
            reference: p.map(|p| p.mean),
            note,
        });
    }
    bars
}

fn caption(group: &KGroup, seen: &Seen) -> String {
    let mut caption = format!(
        "Bars: mean per-node acceptance of each scheme; black tick: P*, the optimal acceptance for the same nodes' draft and target laws; {}. {}.",
        seeds_note(seen.seeds),
        settings(&group.rows)
    );
    // Schemes whose drafts are not i.i.d. (without replacement, greedy) can
    // land more often than the i.i.d. optimum.
    let non_iid: Vec<&str> = SCHEMES
        .iter()
        .filter(|entry| entry.build_default().draft_law() != DraftLaw::Independent)
        .map(|entry| entry.id)
        .filter(|id| group.rows.iter().any(|r| r.scheme == *id))
        .collect();
    if !non_iid.is_empty() {
        caption.push_str(&format!(
            " {} {} non-i.i.d. drafts and can exceed P* (the i.i.d. optimum).",
            non_iid.join(" and "),
            if non_iid.len() == 1 { "draws" } else { "draw" }
        ));
    }
    if seen.missing_pstar {
        caption.push_str(" P* is not computed for non-identical drafts with large supports.");
    }
    caption
}

fn acceptance_figure(dataset: &Dataset, group: &KGroup) -> Figure {
    let mut seen = Seen::default();
    let mut panels = Vec::new();
    for (temp_set, here) in by_temp_set(&group.rows) {
        panels.push(Panel {
            title: format!("draft T = {temp_set}"),
            x_label: "mean acceptance probability per node".into(),
            y_label: String::new(),
            body: Body::Bars(bars(group, &here, &mut seen)),
            reference: None,
            x_range: Some((0.0, 1.0)),
            y_range: None,
            integer_x: false,
            percent_y: false,
        });
    }
    Figure {
        name: format!("accept-vs-pstar-{dataset}{}", group.suffix()),
        title: format!(
            "{dataset}: acceptance against the optimum P*, {}",
            group.title()
        ),
        caption: caption(group, &seen),
        legend: Vec::new(),
        columns: panels.len().min(3),
        panels,
    }
}
