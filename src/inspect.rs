//! `specbench inspect logits`: a model's view of one text.

use anyhow::{Result, bail};

use crate::model::checkpoint::{LoadOptions, load_checkpoint, parse_device, parse_dtype};
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

pub struct InspectRequest<'a> {
    pub model: &'a str,
    pub text: &'a str,
    pub revision: Option<String>,
    pub device: &'a str,
    pub dtype: &'a str,
    /// How many of the most likely next tokens to decode.
    pub top: usize,
}

pub fn next_token(request: &InspectRequest) -> Result<NextToken> {
    let options = LoadOptions {
        revision: request.revision.clone(),
        device: parse_device(request.device)?,
        dtype: parse_dtype(request.dtype)?,
    };
    let mut loaded = load_checkpoint(request.model, &options)?;
    let Some(tokenizer) = loaded.tokenizer.as_ref() else {
        bail!(
            "model '{}' ships no tokenizer (tokenizer.json, or vocab.json + merges.txt)",
            request.model
        );
    };
    let ids = tokenizer.encode(request.text)?;
    let logits = loaded.model.forward(&[&ids], Positions::Last)?;
    let piece = |id: u32| {
        tokenizer
            .decode(&[id])
            .unwrap_or_else(|_| format!("<{id}>"))
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
