//! `specbench inspect logits`: a model's view of one text.

use anyhow::{Result, bail};

use crate::model::checkpoint::{LoadOptions, load_checkpoint};
use crate::model::device::{DeviceChoice, Precision};
use crate::model::{Positions, Tokenizer};

/// Token ids of a text and the next-token log-probabilities after it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NextToken {
    pub ids: Vec<u32>,
    /// `log_softmax(logits)` over the model's full vocabulary, in f64.
    pub logprobs: Vec<f64>,
    /// The ids as token strings (table output only).
    #[serde(skip)]
    pub pieces: Vec<String>,
    /// The most likely next tokens: `(id, logprob, text)` (table output only).
    #[serde(skip)]
    pub top: Vec<(u32, f64, String)>,
}

/// What the model reads: a text through its tokenizer, or token ids.
pub enum InspectInput<'a> {
    Text(&'a str),
    Ids(Vec<u32>),
}

pub struct InspectRequest<'a> {
    pub model: &'a str,
    pub input: InspectInput<'a>,
    pub revision: Option<String>,
    pub device: DeviceChoice,
    pub dtype: Precision,
    /// How many of the most likely next tokens to decode.
    pub top: usize,
}

pub fn next_token(request: &InspectRequest) -> Result<NextToken> {
    let options = LoadOptions {
        revision: request.revision.clone(),
        device: request.device.open()?,
        dtype: request.dtype.dtype(),
        ..LoadOptions::default()
    };
    let mut loaded = load_checkpoint(request.model, &options)?;
    let tokenizer = loaded.tokenizer.as_ref();
    let ids = match (&request.input, tokenizer) {
        (InspectInput::Ids(ids), _) => {
            if ids.is_empty() {
                bail!("--ids is empty: give at least one token id (2 is OPT's BOS)");
            }
            ids.clone()
        }
        (InspectInput::Text(text), Some(tokenizer)) => tokenizer.encode(text)?,
        (InspectInput::Text(_), None) => bail!(
            "model '{}' ships no tokenizer (tokenizer.json, or vocab.json + merges.txt): pass --ids instead of --text",
            request.model
        ),
    };
    let logits = loaded.model.forward(&[&ids], Positions::Last)?;
    let piece = |id: u32| {
        tokenizer
            .and_then(|t| t.decode(&[id]).ok())
            .unwrap_or_else(|| format!("<{id}>"))
    };
    let logprobs = log_softmax(logits.at(0, 0)?);
    let mut order: Vec<usize> = (0..logprobs.len()).collect();
    order.sort_by(|&a, &b| logprobs[b].total_cmp(&logprobs[a]));
    let top = order
        .iter()
        .take(request.top)
        .map(|&id| (id as u32, logprobs[id], piece(id as u32)))
        .collect();
    Ok(NextToken {
        pieces: ids.iter().map(|&id| piece(id)).collect(),
        ids,
        logprobs,
        top,
    })
}

/// Log-softmax in f64 (max-shifted).
pub fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits
        .iter()
        .fold(f64::NEG_INFINITY, |m, &x| m.max(f64::from(x)));
    let total: f64 = logits.iter().map(|&x| (f64::from(x) - max).exp()).sum();
    let log_total = max + total.ln();
    logits.iter().map(|&x| f64::from(x) - log_total).collect()
}

/// The ids and the most likely next tokens, as a table.
pub fn next_token_table(next: &NextToken) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "ids ({}): {:?}", next.ids.len(), next.ids);
    let _ = writeln!(out, "tokens: {:?}", next.pieces);
    let _ = writeln!(
        out,
        "{:>6}  {:>9}  {:>7}  next token",
        "id", "logprob", "prob"
    );
    for (id, lp, text) in &next.top {
        let _ = writeln!(out, "{id:>6}  {lp:>9.4}  {:>7.4}  {text:?}", lp.exp());
    }
    out
}
