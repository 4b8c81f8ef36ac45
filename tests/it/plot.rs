//! `specbench plot`: the figures' content read back from the SVG (titles,
//! axis labels, legend entries, one marker per point and series, error bars
//! only with two or more seeds), the figures skipped with their reasons,
//! and Figure 2 from its CSV (bad input and real runs: `plot_inputs.rs`).

use crate::common;
use crate::common::made_up::{DEPTHS, SCHEMES, Sweep, TEMPS, cell, rows, write_run};

use std::path::{Path, PathBuf};

use specbench::experiment::metrics::mean;
use specbench::report::plot::style::{hex, scheme_style};
use specbench::report::plot::{Figures, ImageFormat, figures, plot};

fn scratch(name: &str) -> PathBuf {
    common::scratch("plot", name)
}

/// The text of every `<text>` element, unescaped.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .map(|part| {
            let body = &part[part.find('>').unwrap() + 1..part.find("</text>").unwrap()];
            body.trim()
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&apos;", "'")
                .replace("&amp;", "&")
        })
        .collect()
}

/// Elements of a kind (`circle`, `polygon`, `rect`) filled with a colour.
fn filled(svg: &str, element: &str, color: &str) -> usize {
    svg.split(&format!("<{element} "))
        .skip(1)
        .filter(|e| e[..e.find('>').unwrap()].contains(&format!("fill=\"{color}\"")))
        .count()
}

/// `points` of every polyline stroked with a colour at a width.
fn polylines(svg: &str, color: &str, width: u32) -> Vec<Vec<(i32, i32)>> {
    svg.split("<polyline ")
        .skip(1)
        .map(|e| &e[..e.find("/>").unwrap()])
        .filter(|e| {
            e.contains(&format!("stroke=\"{color}\""))
                && e.contains(&format!("stroke-width=\"{width}\""))
        })
        .map(|e| {
            let start = e.find("points=\"").unwrap() + 8;
            let end = start + e[start..].find('"').unwrap();
            e[start..end]
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        })
        .collect()
}

fn svg_of(out: &Path, name: &str) -> String {
    std::fs::read_to_string(out.join(format!("{name}.svg")))
        .unwrap_or_else(|e| panic!("{name}.svg: {e}"))
}

/// Markers of a scheme's style (circle/rect/polygon by its marker).
fn markers(svg: &str, scheme: &str) -> usize {
    let style = scheme_style(scheme);
    let color = hex(style.color);
    let element = match style.marker.name() {
        "circle" => "circle",
        "square" => "rect",
        "triangle" | "diamond" => "polygon",
        other => panic!("no filled element for {other}"),
    };
    filled(svg, element, &color)
}

#[test]
fn figure3_holds_one_series_per_scheme_with_error_bars_over_seeds() {
    let root = scratch("fig3");
    let run = write_run(
        &root.join("run"),
        &rows(&Sweep {
            ks: &[2],
            temp_sets: &TEMPS,
            seeds: &[1, 2, 3],
            with_sd: true,
        }),
    );
    let out = root.join("plots");
    let report = plot(
        std::slice::from_ref(&run),
        &out,
        &[ImageFormat::Svg, ImageFormat::Png],
    )
    .unwrap();
    let names: Vec<&str> = report.written.iter().map(|w| w.name.as_str()).collect();
    assert!(names.contains(&"fig3-dolly"), "{names:?}");
    assert!(out.join("fig3-dolly.png").is_file());
    // One K: no block-efficiency-by-K figure, and no pairs: no Figure 4.
    let skipped: Vec<&str> = report.skipped.iter().map(|s| s.name.as_str()).collect();
    assert!(
        skipped.contains(&"be-by-k") && skipped.contains(&"fig4"),
        "{skipped:?}"
    );
    assert!(
        report
            .summary()
            .contains("skipped fig4: no non-identical draft pairs")
    );

    let svg = svg_of(&out, "fig3-dolly");
    assert_the_png_is_the_svgs_size(&out.join("fig3-dolly.png"), &svg);
    assert_figure3_titles_and_legend(&svg);
    assert_figure3_draws_each_scheme_with_error_bars(&svg);
    assert_figure3_points_are_percent_over_sd_means(run);
    std::fs::remove_dir_all(&root).unwrap();
}

/// The PNG is the same picture: a PNG of the SVG's size.
fn assert_the_png_is_the_svgs_size(png: &Path, svg: &str) {
    let png = std::fs::read(png).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let be32 = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    assert!(
        svg.contains(&format!("width=\"{}\" height=\"{}\"", be32(16), be32(20))),
        "PNG {}x{}",
        be32(16),
        be32(20)
    );
}

/// Figure 3's title, panel titles, axis labels, legend and seed note.
fn assert_figure3_titles_and_legend(svg: &str) {
    let text = texts(svg);
    for expected in [
        "dolly: identical drafts, K = 2",
        "Block efficiency",
        "Token rate",
        "block efficiency, % over single-draft SD",
        "token rate, % over single-draft SD",
        "draft temperature",
        "specinfer",
        "spectr",
        "is",
        "SD baseline (0 %)",
    ] {
        assert!(
            text.iter().any(|t| t == expected),
            "no '{expected}' in {text:?}"
        );
    }
    assert!(
        text.iter()
            .any(|t| t.contains("mean over 3 seeds, error bars ± 1 s.e. over seeds")),
        "{text:?}"
    );
}

/// Each scheme's markers, lines and error bars in its own colour.
fn assert_figure3_draws_each_scheme_with_error_bars(svg: &str) {
    for scheme in SCHEMES {
        // 3 temperatures × 2 panels, plus the legend sample.
        assert_eq!(markers(svg, scheme), 3 * 2 + 1, "{scheme}");
        let color = hex(scheme_style(scheme).color);
        let lines = polylines(svg, &color, 2);
        // One line per panel through the 3 temperatures, plus the legend's.
        assert_eq!(
            lines.iter().filter(|l| l.len() == 3).count(),
            2,
            "{scheme}: {lines:?}"
        );
        // Error bars: a stem and two caps per point (3 seeds differ).
        assert_eq!(polylines(svg, &color, 1).len(), 3 * 3 * 2, "{scheme}");
    }
}

/// The numbers behind the points: % over SD, mean over seeds.
fn assert_figure3_points_are_percent_over_sd_means(run: PathBuf) {
    let Figures { figures, .. } = figures(&[run]).unwrap();
    let fig3 = figures.iter().find(|f| f.name == "fig3-dolly").unwrap();
    let series = &fig3.panels[0].series()[0];
    assert_eq!(series.label, "specinfer");
    let expected: Vec<f64> = [1, 2, 3]
        .iter()
        .map(|&seed| {
            let sd = cell("sd", "single", 1, "1.6", seed).block_efficiency;
            100.0 * (cell("scheme", "specinfer", 2, "1.6", seed).block_efficiency / sd - 1.0)
        })
        .collect();
    let point = series.points.iter().find(|p| p.x == 1.6).unwrap();
    assert!((point.y - mean(&expected)).abs() < 1e-9, "{point:?}");
    assert!(point.err.unwrap() > 0.0);
}

#[test]
fn one_seed_draws_no_error_bars_and_says_so() {
    let root = scratch("one-seed");
    let run = write_run(
        &root.join("run"),
        &rows(&Sweep {
            ks: &[2],
            temp_sets: &TEMPS,
            seeds: &[7],
            with_sd: true,
        }),
    );
    let out = root.join("plots");
    plot(&[run], &out, &[ImageFormat::Svg]).unwrap();
    let svg = svg_of(&out, "fig3-dolly");
    assert!(
        texts(&svg)
            .iter()
            .any(|t| t.contains("1 seed: no error bars"))
    );
    for scheme in SCHEMES {
        assert_eq!(
            polylines(&svg, &hex(scheme_style(scheme).color), 1).len(),
            0
        );
    }
    assert!(!out.join("fig3-dolly.png").exists());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn several_k_and_pairs_give_figure4_k_figures_depth_and_pstar() {
    let root = scratch("pairs");
    let mut all = rows(&Sweep {
        ks: &[2, 3],
        temp_sets: &["1.2", "1.6"],
        seeds: &[1, 2],
        with_sd: true,
    });
    all.extend(rows(&Sweep {
        ks: &[2, 3],
        temp_sets: &["1.2:1.6", "1.2:2.0", "1.2:2.4"],
        seeds: &[1, 2],
        with_sd: true,
    }));
    let run = write_run(&root.join("run"), &all);
    let out = root.join("plots");
    let report = plot(&[run], &out, &[ImageFormat::Svg]).unwrap();
    let names: Vec<&str> = report.written.iter().map(|w| w.name.as_str()).collect();
    for expected in [
        "fig3-dolly-k2",
        "fig3-dolly-k3",
        "fig4-dolly-t1-1.2-k2",
        "fig4-dolly-t1-1.2-k3",
        "be-by-k-dolly",
        "accept-by-depth-dolly-k2",
        "accept-vs-pstar-dolly-k3",
    ] {
        assert!(names.contains(&expected), "no {expected} in {names:?}");
    }

    let fig4 = svg_of(&out, "fig4-dolly-t1-1.2-k3");
    let text = texts(&fig4);
    assert!(text.contains(&"dolly: non-identical drafts, first draft T = 1.2, K = 3".to_string()));
    assert!(text.contains(&"second draft's temperature".to_string()));
    for scheme in SCHEMES {
        assert_eq!(markers(&fig4, scheme), 3 * 2 + 1, "{scheme}");
    }

    // Block efficiency against K: two K per scheme, SD as the K = 1 point,
    // in each of the five temperature-set panels.
    let by_k = svg_of(&out, "be-by-k-dolly");
    let text = texts(&by_k);
    assert!(text.contains(&"number of drafts K".to_string()));
    assert!(text.contains(&"block efficiency (tokens per target call)".to_string()));
    for scheme in SCHEMES {
        assert_eq!(markers(&by_k, scheme), 5 * 2 + 1, "{scheme}");
    }
    assert_eq!(markers(&by_k, "single"), 5 + 1);

    // Per-depth acceptance: L points per scheme and panel.
    let depth = svg_of(&out, "accept-by-depth-dolly-k2");
    assert!(texts(&depth).contains(&"fraction of visited nodes accepted".to_string()));
    for scheme in SCHEMES {
        assert_eq!(markers(&depth, scheme), 5 * DEPTHS + 1, "{scheme}");
    }

    // Acceptance against P*: one bar per scheme and panel, the ratio noted.
    let pstar = svg_of(&out, "accept-vs-pstar-dolly-k3");
    let text = texts(&pstar);
    for scheme in SCHEMES {
        assert_eq!(
            filled(&pstar, "rect", &hex(scheme_style(scheme).color)),
            5,
            "{scheme}"
        );
    }
    for s in 0..=3 {
        // Mean over seeds 1 and 2 of 0.5 + 0.03 s + 0.01 seed; P* is 0.02 more.
        let a = 0.5 + 0.03 * s as f64 + 0.015;
        let note = format!("{:.3} = {:.1}% of P*", a, 100.0 * a / (a + 0.02));
        assert_eq!(text.iter().filter(|t| **t == note).count(), 5, "{note}");
    }
    assert!(text.contains(&"SD, K = 1".to_string()));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn figure2_from_the_theory_csv() {
    let root = scratch("fig2");
    let csv = root.join("figure2.csv");
    // A few points of each panel (values shaped like the exact ones).
    let mut text = String::from("panel,q2,optimal,is_full_lp,spectr,rho_star,specinfer,sd\n");
    for (panel, max) in [("left", 2.0 / 3.0), ("right", 5.0 / 6.0)] {
        for i in 0..=8 {
            let q2 = max * i as f64 / 8.0;
            let sd = 1.0 - (q2 - 1.0 / 3.0).abs();
            text.push_str(&format!(
                "{panel},{q2},{},{},{},1.5,{},{sd}\n",
                sd + 0.1,
                sd + 0.1,
                sd + 0.05,
                sd + 0.03
            ));
        }
    }
    std::fs::write(&csv, text).unwrap();
    let out = root.join("plots");
    let report = plot(&[csv], &out, &[ImageFormat::Svg, ImageFormat::Png]).unwrap();
    assert_eq!(report.written.len(), 1);
    assert!(out.join("fig2.png").is_file());
    let svg = svg_of(&out, "fig2");
    let text = texts(&svg);
    for expected in [
        "Figure 2: acceptance probability with K = 2 identical drafts",
        "Left panel: q = (1/3, q2, 2/3 − q2)",
        "Right panel: q = (1/6, q2, 5/6 − q2)",
        "acceptance probability",
        "Optimal",
        "IS, full pairwise LP (s = M = 3)",
        "SpecTr",
        "SpecInfer",
        "SD",
    ] {
        assert!(
            text.iter().any(|t| t == expected),
            "no '{expected}' in {text:?}"
        );
    }
    // Optimal: one 9-point black line per panel; SpecTr likewise.
    for curve in ["Optimal", "SpecTr", "SpecInfer"] {
        let lines = polylines(&svg, &hex(scheme_style(curve).color), 2);
        assert_eq!(lines.iter().filter(|l| l.len() == 9).count(), 2, "{curve}");
    }
    // The full-LP markers sit exactly on the Optimal line's vertices.
    let optimal = polylines(&svg, "#000000", 2);
    let vertices: Vec<(i32, i32)> = optimal
        .iter()
        .filter(|l| l.len() == 9)
        .flatten()
        .copied()
        .collect();
    let lp_markers = filled(&svg, "polygon", &hex(scheme_style("is").color));
    assert_eq!(lp_markers, 2 * 9 + 1);
    for part in svg.split("<polygon ").skip(1) {
        let e = &part[..part.find("/>").unwrap()];
        if !e.contains(&format!("fill=\"{}\"", hex(scheme_style("is").color))) {
            continue;
        }
        let start = e.find("points=\"").unwrap() + 8;
        let pts: Vec<(i32, i32)> = e[start..start + e[start..].find('"').unwrap()]
            .split_whitespace()
            .map(|p| {
                let (x, y) = p.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect();
        // The triangle's apex is 6 px above its centre.
        let centre = (pts[0].0, pts[0].1 + 6);
        let on_line = vertices
            .iter()
            .any(|v| (v.0 - centre.0).abs() <= 1 && (v.1 - centre.1).abs() <= 1);
        let in_legend = centre.0 > vertices.iter().map(|v| v.0).max().unwrap();
        assert!(
            on_line || in_legend,
            "marker at {centre:?} off the Optimal curve"
        );
    }
    std::fs::remove_dir_all(&root).unwrap();
}
