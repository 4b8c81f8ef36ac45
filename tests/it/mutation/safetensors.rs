//! safetensors mutants: the header length, the JSON header (each tensor's
//! dtype, shape and data offsets, `__metadata__`), and the data, of two
//! committed fixtures (an OPT and a Llama, whose loaders differ). Read by
//! `inspect logits --ids`, which maps every tensor and runs a forward pass.

use serde_json::Value;

use super::mutate::{Edit, Mutants, Rng, Step, counts_at, flips, put, render, truncations};
use super::{Case, Entry, Expect, repo, run_cases};

/// Raw JSON for a tensor's fields: other dtypes (and a non-string), sizes
/// no file holds, and offsets reversed, empty, overlapping or past the end.
fn field_tokens(field: &str, start: u64, end: u64, data_len: u64) -> Vec<String> {
    let s = |v: &[&str]| v.iter().map(|t| t.to_string()).collect::<Vec<_>>();
    match field {
        "dtype" => s(&[
            "\"F16\"",
            "\"BF16\"",
            "\"F64\"",
            "\"I64\"",
            "\"U8\"",
            "\"BOOL\"",
            "\"F8_E4M3\"",
            "\"X\"",
            "0",
        ]),
        "shape" => s(&[
            "[]",
            "[0]",
            "[1]",
            "[2147483648]",
            "[4611686018427387904,4611686018427387904]",
            "[18446744073709551615]",
            "[-1]",
            "\"x\"",
        ]),
        _ => vec![
            "[0,0]".into(),
            format!("[{end},{start}]"),
            format!("[{start},{}]", start + 1),
            format!("[{start},{}]", end + 4),
            format!("[0,{}]", 1u64 << 62),
            format!("[{start},{}]", data_len + 1),
            "[18446744073709551615,18446744073709551615]".into(),
            format!("[{start}]"),
            "\"x\"".into(),
        ],
    }
}

/// The file with a new JSON header (padded to 8 bytes, as writers do).
fn with_header(header: &str, data: &[u8]) -> Vec<u8> {
    let mut header = header.as_bytes().to_vec();
    header.resize(header.len().div_ceil(8) * 8, b' ');
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header);
    out.extend(data);
    out
}

/// Edits of one tensor's entry; `all` takes every one, else `k` of them.
fn tensor_edits(
    doc: &Value,
    name: &str,
    data_len: u64,
    k: Option<usize>,
    rng: &mut Rng,
) -> Vec<(String, String)> {
    let offsets = &doc[name]["data_offsets"];
    let (start, end) = (offsets[0].as_u64().unwrap(), offsets[1].as_u64().unwrap());
    let mut edits = Vec::new();
    for field in ["dtype", "shape", "data_offsets"] {
        let at = [Step::Key(name.into()), Step::Key(field.into())];
        for token in field_tokens(field, start, end, data_len) {
            edits.push((
                format!("{name}.{field} = {token}"),
                render(doc, &at, &Edit::Replace(&token)),
            ));
        }
        edits.push((
            format!("{name}.{field} removed"),
            render(doc, &at, &Edit::Remove),
        ));
    }
    let at = [Step::Key(name.into())];
    edits.push((
        format!("{name} given twice"),
        render(doc, &at, &Edit::Twice("{}")),
    ));
    edits.push((
        format!("{name} = null"),
        render(doc, &at, &Edit::Replace("null")),
    ));
    if let Some(k) = k {
        let keep = rng.pick(edits.len(), rng.more(k));
        edits = keep
            .into_iter()
            .map(|i| std::mem::take(&mut edits[i]))
            .collect();
    }
    edits
}

/// Every kind of mutant of one safetensors file; `full` names the tensors
/// that get every header edit (the rest get `sample` each).
fn mutants(seed: &[u8], full: &[&str], sample: usize, rng: &mut Rng) -> Mutants {
    let n = u64::from_le_bytes(seed[..8].try_into().unwrap()) as usize;
    let (header, data) = (&seed[8..8 + n], &seed[8 + n..]);
    let doc: Value = serde_json::from_slice(header).unwrap();
    let len = seed.len() as u64;
    let extra = [
        ("n - 1", n as u64 - 1),
        ("n + 1", n as u64 + 1),
        ("the file's length", len),
        ("7", 7),
    ];
    let mut out: Mutants = counts_at(seed, 0, 8, &extra)
        .into_iter()
        .map(|(label, bytes)| (format!("header length {label}"), bytes))
        .collect();
    let mut headers: Vec<(String, String)> = Vec::new();
    for name in doc
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| *k != "__metadata__")
    {
        let k = (!full.contains(&name.as_str())).then_some(sample);
        headers.extend(tensor_edits(&doc, name, data.len() as u64, k, rng));
    }
    let meta = [Step::Key("__metadata__".into())];
    for (label, edit) in [
        ("removed", Edit::Remove),
        ("= \"x\"", Edit::Replace("\"x\"")),
        ("= {\"format\":1}", Edit::Replace("{\"format\":1}")),
        ("given twice", Edit::Twice("{}")),
    ] {
        headers.push((format!("__metadata__ {label}"), render(&doc, &meta, &edit)));
    }
    headers.push(("header = []".into(), "[]".into()));
    headers.push(("header = {}".into(), "{}".into()));
    for (label, header) in headers {
        out.push((format!("header {label}"), with_header(&header, data)));
    }
    // Cuts in the header (its length kept) and flips of its text.
    for cut in [1, n / 3, n / 2, n - 2] {
        let mut bytes = seed.to_vec();
        bytes[8 + cut..8 + n].fill(b' ');
        out.push((format!("header text cut at {cut}"), bytes));
    }
    out.extend(
        flips(seed, 8..8 + n, rng.more(10), rng)
            .into_iter()
            .map(|(l, b)| (format!("header {l}"), b)),
    );
    let first = 8 + n;
    out.push((
        "data starts with NaN".into(),
        put(seed, first, &f32::NAN.to_le_bytes()),
    ));
    out.push((
        "data starts with inf".into(),
        put(seed, first, &f32::INFINITY.to_le_bytes()),
    ));
    out.extend(truncations(
        seed,
        &[8, first - 1, first, first + 4],
        rng.more(8),
        rng,
    ));
    out.extend(flips(seed, first..seed.len(), rng.more(5), rng));
    out
}

fn fixture_cases(fixture: &str, full: &[&str], sample: usize, rng: &mut Rng) -> Vec<Case> {
    let dir = repo().join("tests/fixtures").join(fixture);
    let seed = std::fs::read(dir.join("model.safetensors")).unwrap();
    let mut all: Mutants = vec![("seed".into(), seed.clone())];
    all.extend(mutants(&seed, full, sample, rng));
    all.into_iter()
        .map(|(label, bytes)| {
            let expect = if label == "seed" {
                Expect::Success
            } else {
                Expect::Clean
            };
            let files = vec![
                ("m/model.safetensors".to_string(), Entry::Bytes(bytes)),
                (
                    "m/config.json".to_string(),
                    Entry::Link(dir.join("config.json")),
                ),
            ];
            let args = [
                "inspect", "logits", "--model", "{dir}/m", "--ids", "1,5,7", "--top", "3",
            ];
            Case::new(format!("safetensors {fixture}: {label}"), files, &args).expect(expect)
        })
        .collect()
}

#[test]
fn safetensors_mutants_end_cleanly() {
    run_cases("safetensors", cases(1));
}

/// Both fixtures' mutants; `scale` draws that many times more.
pub fn cases(scale: usize) -> Vec<Case> {
    let mut rng = Rng::new(0x7361_6665, scale);
    let opt = [
        "model.decoder.embed_tokens.weight",
        "model.decoder.layers.0.self_attn.q_proj.weight",
        "model.decoder.layers.0.self_attn_layer_norm.bias",
    ];
    let mut all = fixture_cases("opt-tiny-preln", &opt, 2, &mut rng);
    let llama = [
        "model.embed_tokens.weight",
        "model.layers.1.mlp.up_proj.weight",
    ];
    all.extend(fixture_cases("llama-tiny", &llama, 1, &mut rng));
    all
}
