//! Progress of a run: indicatif bars (cells; prompts within the cell; ETA)
//! on a terminal, one plain line per finished cell otherwise.

use std::io::IsTerminal;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

pub struct Progress {
    bars: Option<(MultiProgress, ProgressBar, ProgressBar)>,
    total: usize,
    done: usize,
}

impl Progress {
    /// Bars only when stderr is a terminal.
    pub fn new(total_cells: usize) -> Self {
        let bars = std::io::stderr().is_terminal().then(|| {
            let multi = MultiProgress::new();
            let cells = multi.add(ProgressBar::new(total_cells as u64));
            cells.set_style(
                ProgressStyle::with_template(
                    "cells   [{bar:30}] {pos}/{len} {elapsed_precise} eta {eta_precise}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            let prompts = multi.add(ProgressBar::new(0));
            prompts.set_style(
                ProgressStyle::with_template("prompts [{bar:30}] {pos}/{len} {msg}")
                    .expect("static template")
                    .progress_chars("=> "),
            );
            (multi, cells, prompts)
        });
        Self {
            bars,
            total: total_cells,
            done: 0,
        }
    }

    pub fn start_cell(&self, id: &str, prompts: usize) {
        if let Some((_, _, bar)) = &self.bars {
            bar.set_length(prompts as u64);
            bar.set_position(0);
            bar.set_message(id.to_string());
        }
    }

    pub fn prompt_done(&self) {
        if let Some((_, _, bar)) = &self.bars {
            bar.inc(1);
        }
    }

    /// One line per finished cell, above the bars or on its own.
    pub fn cell_done(&mut self, line: &str) {
        self.done += 1;
        let line = format!("[{}/{}] {line}", self.done, self.total);
        match &self.bars {
            Some((multi, cells, _)) => {
                let _ = multi.println(line);
                cells.inc(1);
            }
            None => eprintln!("{line}"),
        }
    }

    /// One line for a cell that failed: it counts as done for the bar.
    pub fn cell_failed(&mut self, id: &str, error: &str) {
        self.done += 1;
        let line = format!("[{}/{}] {id} FAILED: {error}", self.done, self.total);
        match &self.bars {
            Some((multi, cells, _)) => {
                let _ = multi.println(line);
                cells.inc(1);
            }
            None => eprintln!("{line}"),
        }
    }

    pub fn finish(&self) {
        if let Some((_, cells, prompts)) = &self.bars {
            prompts.finish_and_clear();
            cells.finish_and_clear();
        }
    }
}
