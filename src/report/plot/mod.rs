//! `specbench plot`: figures from finished runs (and from the CSV of
//! `theory figure2`), as SVG and PNG. Each builder picks the figures the
//! data supports and says why it skipped the others; `draw` renders them.

pub mod data;
pub mod draw;
pub mod figure;
pub mod figure2;
pub mod parity;
pub mod parity_cost;
pub mod style;

/// Declares each family's module and lists its builder in [`RUN_FIGURES`]:
/// one line a family.
macro_rules! figures {
    ($($module:ident: $build:ident;)*) => {
        $(pub mod $module;)*

        /// Every family of figures `plot` draws from runs, in the order it
        /// writes them.
        pub const RUN_FIGURES: &[RunFigures] = &[$($module::$build),*];
    };
}

figures! {
    temperature: temperature_figures;
    by_k: by_k_figures;
    by_trunk: by_trunk_figures;
    depth: depth_figures;
    acceptance: acceptance_figures;
    verifiers: verifiers_figures;
}

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::experiment::metrics::CellRow;

use super::results::load;

pub use super::Skip;
pub use figure::Figure;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    Svg,
    Png,
}

impl ImageFormat {
    pub fn extension(self) -> &'static str {
        match self {
            ImageFormat::Svg => "svg",
            ImageFormat::Png => "png",
        }
    }

    /// `svg,png` → both, in that order.
    pub fn parse_list(text: &str) -> Result<Vec<ImageFormat>> {
        let mut formats = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let format = match part.to_ascii_lowercase().as_str() {
                "svg" => ImageFormat::Svg,
                "png" => ImageFormat::Png,
                other => bail!("--format {other}: choose svg, png or svg,png"),
            };
            if !formats.contains(&format) {
                formats.push(format);
            }
        }
        if formats.is_empty() {
            bail!("--format is empty: choose svg, png or svg,png");
        }
        Ok(formats)
    }
}

/// Makes a family of figures from a run's rows, noting each one the rows
/// cannot fill in `skipped`.
pub type RunFigures = fn(&[CellRow], &mut Vec<Skip>) -> Vec<Figure>;

/// The figures the inputs support, and the ones skipped with the reason.
#[derive(Clone, Debug)]
pub struct Figures {
    pub figures: Vec<Figure>,
    pub skipped: Vec<Skip>,
}

/// Builds every figure (no files written): Figure 2 from each theory CSV,
/// the run figures from everything else, loaded together.
pub fn figures(inputs: &[PathBuf]) -> Result<Figures> {
    if inputs.is_empty() {
        bail!("give at least one run directory, cells.csv or `theory figure2` CSV");
    }
    for input in inputs {
        figure2::check_not_stale(input)?;
    }
    // A `bench parity` directory is a parity run too: it gives both figures.
    let cost_files: Vec<PathBuf> = inputs
        .iter()
        .filter_map(|p| parity_cost::cost_file(p))
        .collect();
    let inputs: Vec<&PathBuf> = (inputs.iter())
        .filter(|p| !p.is_file() || parity_cost::cost_file(p).is_none())
        .collect();
    let (parity_runs, inputs): (Vec<&PathBuf>, Vec<&PathBuf>) = inputs
        .into_iter()
        .partition(|p| parity::parity_histograms(p).is_some());
    let (theory, runs): (Vec<&PathBuf>, Vec<&PathBuf>) =
        inputs.into_iter().partition(|p| figure2::is_figure2_csv(p));
    let mut figures = Vec::new();
    let mut skipped = Vec::new();
    for (n, path) in theory.iter().enumerate() {
        let mut figure = figure2::figure2(path)?;
        if theory.len() > 1 {
            figure.name = format!("fig2-{}", n + 1);
        }
        figures.push(figure);
    }
    for (n, path) in parity_runs.iter().enumerate() {
        let file = parity::parity_histograms(path).expect("partitioned on it");
        let mut figure = parity::parity_figure(&file)?;
        if parity_runs.len() > 1 {
            figure.name = format!("parity-{}", n + 1);
        }
        figures.push(figure);
    }
    if !cost_files.is_empty() {
        figures.push(parity_cost::cost_figure(&cost_files)?);
    }
    if !runs.is_empty() {
        let runs: Vec<PathBuf> = runs.into_iter().cloned().collect();
        let results = load(&runs)?;
        for run_figures in RUN_FIGURES {
            figures.extend(run_figures(&results.rows, &mut skipped));
        }
    } else if parity_runs.is_empty() && cost_files.is_empty() {
        skipped.push(Skip::new(
            "run figures",
            "no run directory or cells.csv given (only Figure 2 CSVs)",
        ));
    }
    Ok(Figures { figures, skipped })
}

/// One figure written, in each format.
#[derive(Clone, Debug)]
pub struct Written {
    pub name: String,
    pub title: String,
    pub files: Vec<PathBuf>,
}

#[derive(Clone, Debug)]
pub struct PlotReport {
    pub written: Vec<Written>,
    pub skipped: Vec<Skip>,
}

impl PlotReport {
    /// What was written and what was skipped, one line each.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for w in &self.written {
            let files: Vec<String> = w.files.iter().map(|f| f.display().to_string()).collect();
            out.push_str(&format!(
                "wrote {}: {} ({})\n",
                w.name,
                w.title,
                files.join(", ")
            ));
        }
        for s in &self.skipped {
            out.push_str(&format!("skipped {}: {}\n", s.name, s.reason));
        }
        out
    }
}

/// Writes `NAME.svg` / `NAME.png` for every figure into `out`.
pub fn write_figure(figure: &Figure, out: &Path, formats: &[ImageFormat]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for format in formats {
        let path = out.join(format!("{}.{}", figure.name, format.extension()));
        match format {
            ImageFormat::Svg => {
                let text = draw::svg(figure)?;
                std::fs::write(&path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            ImageFormat::Png => draw::png(figure, &path)?,
        }
        files.push(path);
    }
    Ok(files)
}

/// Where figures go without `--out`: `plots/` in the run directory (or in
/// the folder of a CSV file).
pub fn default_plot_dir(first_input: &Path) -> PathBuf {
    let base = if first_input.is_file() {
        first_input.parent().unwrap_or(Path::new(".")).to_path_buf()
    } else {
        first_input.to_path_buf()
    };
    base.join("plots")
}

/// `specbench plot`: builds the figures and writes them into `out`. Fails
/// when the inputs support no figure at all (the reasons in the message).
pub fn plot(inputs: &[PathBuf], out: &Path, formats: &[ImageFormat]) -> Result<PlotReport> {
    let Figures { figures, skipped } = figures(inputs)?;
    if figures.is_empty() {
        let reasons: Vec<String> = skipped
            .iter()
            .map(|s| format!("{}: {}", s.name, s.reason))
            .collect();
        bail!("no figure to draw ({})", reasons.join("; "));
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut written = Vec::new();
    for figure in &figures {
        written.push(Written {
            name: figure.name.clone(),
            title: figure.title.clone(),
            files: write_figure(figure, out, formats)?,
        });
    }
    Ok(PlotReport { written, skipped })
}

// docs/extending.md's worked example of a figure: the doc shows this file's
// text (tests/it/doc_examples.rs), compiled here as if it were
// `src/report/plot/select_time.rs` but not in `figures!`, so `plot` does
// not draw it. The test below draws it as its line in `figures!` would.
#[cfg(test)]
#[path = "examples/select_time.rs"]
mod select_time;

#[cfg(test)]
mod example_tests {
    use std::path::PathBuf;

    use super::{RUN_FIGURES, RunFigures, Skip, draw, load, select_time};

    /// `select_time: select_time_figures;` in `figures!`: the example in
    /// the list with the others, built from the reference run's rows
    /// (`results/tiny`) and drawn.
    #[test]
    fn the_example_figure_builds_from_a_run_and_draws() {
        let list: Vec<RunFigures> = (RUN_FIGURES.iter().copied())
            .chain([select_time::select_time_figures as RunFigures])
            .collect();
        let run = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results/tiny");
        let rows = load(&[run]).unwrap().rows;
        let mut skipped = Vec::new();
        let figures: Vec<_> = list.iter().flat_map(|f| f(&rows, &mut skipped)).collect();
        let [figure] = &figures[..]
            .iter()
            .filter(|f| f.name == "select-time")
            .collect::<Vec<_>>()[..]
        else {
            panic!("one select-time figure, got {figures:#?}");
        };
        assert!(skipped.iter().all(|s| s.name != "select-time"));
        let timed: Vec<_> = rows
            .iter()
            .filter(|r| r.select_us_per_token.is_some())
            .collect();
        let series = figure.panels[0].series();
        let labels = crate::report::in_order(timed.iter().map(|r| r.scheme_label()));
        assert_eq!(series.len(), labels.len());
        for (series, label) in series.iter().zip(&labels) {
            assert_eq!(&series.label, label);
            let ks = crate::report::in_order(
                (timed.iter())
                    .filter(|r| r.scheme_label() == *label)
                    .map(|r| r.k as f64),
            );
            assert_eq!(series.points.len(), ks.len(), "{label}");
            assert!(series.points.iter().all(|p| p.y > 0.0), "{label}");
        }
        assert_eq!(figure.legend.len(), labels.len());
        let svg = draw::svg(figure).unwrap();
        assert!(svg.contains("Selection time against K"));

        let untimed: Vec<_> = (rows.iter().cloned())
            .map(|mut r| {
                r.select_us_per_token = None;
                r
            })
            .collect();
        let mut skipped = Vec::new();
        assert!(select_time::select_time_figures(&untimed, &mut skipped).is_empty());
        assert_eq!(
            skipped,
            [Skip::new("select-time", "no cell timed its selection")]
        );
    }
}
