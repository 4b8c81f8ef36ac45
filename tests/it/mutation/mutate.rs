//! Deterministic mutant generators shared by the reader families: cuts,
//! byte flips, little-endian field overwrites, JSON edits at a path (value
//! swapped for a hostile token, key dropped or given twice), and line
//! edits for JSONL, CSV and TOML. Each returns `(label, bytes)` pairs; the
//! families add the reader's name and the command.

use serde_json::Value;

/// splitmix64: a fixed stream per family, so that a failing mutant keeps
/// its name and bytes from run to run; and how many times more mutants a
/// family draws (1 in the suite, more in the release sweep).
pub struct Rng {
    state: u64,
    scale: usize,
}

impl Rng {
    pub fn new(seed: u64, scale: usize) -> Self {
        Rng { state: seed, scale }
    }

    /// `k` scaled: how many to draw where the suite draws `k`.
    pub fn more(&self, k: usize) -> usize {
        k * self.scale
    }

    pub fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// `k` distinct indices of `0..n` in increasing order (all if `k >= n`).
    pub fn pick(&mut self, n: usize, k: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..n).collect();
        for i in 0..k.min(n) {
            let j = i + self.below(n - i);
            all.swap(i, j);
        }
        all.truncate(k.min(n));
        all.sort_unstable();
        all
    }
}

pub type Mutants = Vec<(String, Vec<u8>)>;

/// `k` of `from`, drawn (all when `k` is at least their number).
pub fn draw<'a>(from: &[&'a str], k: usize, rng: &mut Rng) -> Vec<&'a str> {
    rng.pick(from.len(), k)
        .into_iter()
        .map(|i| from[i])
        .collect()
}

/// Counts and lengths a damaged file may claim: empty, one, and sizes no
/// machine holds (the reader must refuse them, not allocate them).
pub const COUNTS: &[(&str, u64)] = &[
    ("0", 0),
    ("1", 1),
    ("2^31", 1 << 31),
    ("2^62", 1 << 62),
    ("2^64-1", u64::MAX),
];

/// Raw JSON tokens a value is swapped for: hostile numbers (some outside
/// JSON, so a parse error), and every other type.
pub const JSON_TOKENS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2147483648",
    "4611686018427387904",
    "18446744073709551615",
    "-0.5",
    "1e309",
    "NaN",
    "null",
    "true",
    "\"x\"",
    "[]",
    "{}",
];

/// The seed cut at the given points, at its ends and at `random` more.
pub fn truncations(seed: &[u8], points: &[usize], random: usize, rng: &mut Rng) -> Mutants {
    let len = seed.len();
    let mut at: Vec<usize> = vec![0, 1, len / 2, len.saturating_sub(1)];
    at.extend(points.iter().copied().filter(|&p| p < len));
    at.extend((0..random).map(|_| rng.below(len.max(1))));
    at.sort_unstable();
    at.dedup();
    at.into_iter()
        .map(|n| (format!("cut at byte {n} of {len}"), seed[..n].to_vec()))
        .collect()
}

/// `count` copies, each with 1–4 bytes in `range` flipped.
pub fn flips(seed: &[u8], range: std::ops::Range<usize>, count: usize, rng: &mut Rng) -> Mutants {
    (0..count)
        .map(|_| {
            let mut bytes = seed.to_vec();
            let mut at = Vec::new();
            for _ in 0..1 + rng.below(4) {
                let i = range.start + rng.below(range.len());
                bytes[i] ^= 1 + rng.below(255) as u8;
                at.push(i);
            }
            (format!("bytes {at:?} flipped"), bytes)
        })
        .collect()
}

/// The seed with `value` written over `at..at + value.len()`.
pub fn put(seed: &[u8], at: usize, value: &[u8]) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    bytes[at..at + value.len()].copy_from_slice(value);
    bytes
}

/// A little-endian integer field of `width` bytes set to each of
/// [`COUNTS`] (cut to the width) and to `extra`.
pub fn counts_at(seed: &[u8], at: usize, width: usize, extra: &[(&str, u64)]) -> Mutants {
    COUNTS
        .iter()
        .chain(extra)
        .filter(|(_, v)| width == 8 || *v <= u32::MAX as u64 || *v == u64::MAX)
        .map(|&(label, v)| {
            let label = if width == 4 && v == u64::MAX {
                "2^32-1"
            } else {
                label
            };
            (
                format!("= {label}"),
                put(seed, at, &v.to_le_bytes()[..width]),
            )
        })
        .collect()
}

/// Whole-text mutants of a JSON file: cuts, other documents, a BOM.
pub fn whole_json(seed: &[u8], rng: &mut Rng) -> Mutants {
    let mut out = truncations(seed, &[], rng.more(4), rng);
    for other in ["", "[]", "null", "\"x\"", "{\"a\":1}{\"a\":1}"] {
        out.push((format!("the file is {other:?}"), other.as_bytes().to_vec()));
    }
    let mut bom = "\u{feff}".as_bytes().to_vec();
    bom.extend(seed);
    out.push(("a byte-order mark first".into(), bom));
    out
}

/// One step of a path into a JSON document.
#[derive(Clone, Debug)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// What is done at a path.
pub enum Edit<'a> {
    /// The value replaced by raw JSON text.
    Replace(&'a str),
    /// The key (or array element) removed.
    Remove,
    /// The key given twice: first with raw JSON text, then as it was.
    Twice(&'a str),
}

/// The members of an object or the elements of an array, in order;
/// `None` for a scalar.
fn children(v: &Value) -> Option<Vec<(Step, &Value)>> {
    match v {
        Value::Object(map) => Some(map.iter().map(|(k, v)| (Step::Key(k.clone()), v)).collect()),
        Value::Array(items) => Some(
            (items.iter().enumerate())
                .map(|(i, v)| (Step::Index(i), v))
                .collect(),
        ),
        _ => None,
    }
}

/// Every path of the document, parents before children.
pub fn paths(value: &Value) -> Vec<Vec<Step>> {
    fn walk(v: &Value, here: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
        for (step, child) in children(v).unwrap_or_default() {
            here.push(step);
            out.push(here.clone());
            walk(child, here, out);
            here.pop();
        }
    }
    let mut out = Vec::new();
    walk(value, &mut Vec::new(), &mut out);
    out
}

/// A path as the mutants' names write it: `a.b[0].c`.
pub fn path_text(path: &[Step]) -> String {
    let mut text = String::new();
    for step in path {
        match step {
            Step::Key(k) if text.is_empty() => text.push_str(k),
            Step::Key(k) => text.push_str(&format!(".{k}")),
            Step::Index(i) => text.push_str(&format!("[{i}]")),
        }
    }
    text
}

/// The document written back with `edit` applied at `path` (non-empty).
pub fn render(value: &Value, path: &[Step], edit: &Edit) -> String {
    let mut out = String::new();
    write(value, path, edit, &mut out);
    out
}

fn write(value: &Value, path: &[Step], edit: &Edit, out: &mut String) {
    let Some((step, rest)) = path.split_first() else {
        out.push_str(&value.to_string());
        return;
    };
    let here = |s: &Step| match (s, step) {
        (Step::Key(a), Step::Key(b)) => a == b,
        (Step::Index(a), Step::Index(b)) => a == b,
        _ => false,
    };
    let Some(items) = children(value) else {
        return out.push_str(&value.to_string());
    };
    let object = value.is_object();
    out.push(if object { '{' } else { '[' });
    let mut first = true;
    let mut item = |out: &mut String, s: &Step, text: &str| {
        if !std::mem::take(&mut first) {
            out.push(',');
        }
        if let Step::Key(k) = s {
            out.push_str(&Value::String(k.clone()).to_string());
            out.push(':');
        }
        out.push_str(text);
    };
    for (s, child) in items {
        if !here(&s) {
            item(out, &s, &child.to_string());
            continue;
        }
        match (rest.is_empty(), edit) {
            (false, _) => {
                let mut inner = String::new();
                write(child, rest, edit, &mut inner);
                item(out, &s, &inner);
            }
            (true, Edit::Replace(raw)) => item(out, &s, raw),
            (true, Edit::Remove) => {}
            (true, Edit::Twice(raw)) => {
                item(out, &s, raw);
                item(out, &s, &child.to_string());
            }
        }
    }
    out.push(if object { '}' } else { ']' });
}

/// JSON mutants of `doc`: at each of `paths`, the value swapped for every
/// token of `tokens`, the key removed, and the key given twice.
pub fn json_edits(doc: &Value, paths: &[Vec<Step>], tokens: &[&str]) -> Mutants {
    let mut out = Vec::new();
    for path in paths {
        let at = path_text(path);
        for token in tokens {
            let text = render(doc, path, &Edit::Replace(token));
            out.push((format!("{at} = {token}"), text.into_bytes()));
        }
        out.push((
            format!("{at} removed"),
            render(doc, path, &Edit::Remove).into_bytes(),
        ));
        let twice = render(doc, path, &Edit::Twice("null"));
        out.push((format!("{at} given twice"), twice.into_bytes()));
    }
    out
}

/// `k` paths of `doc` drawn from those `keep` accepts.
pub fn some_paths(
    doc: &Value,
    k: usize,
    rng: &mut Rng,
    keep: impl Fn(&str) -> bool,
) -> Vec<Vec<Step>> {
    let all: Vec<Vec<Step>> = paths(doc)
        .into_iter()
        .filter(|p| keep(&path_text(p)))
        .collect();
    rng.pick(all.len(), k)
        .into_iter()
        .map(|i| all[i].clone())
        .collect()
}

/// The path named `a.b[0].c` (keys without dots or brackets).
pub fn path(text: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    for part in text.split('.') {
        let (key, indices) = part.split_once('[').map_or((part, ""), |(k, i)| (k, i));
        if !key.is_empty() {
            steps.push(Step::Key(key.to_string()));
        }
        for index in indices.split('[').filter(|s| !s.is_empty()) {
            steps.push(Step::Index(index.trim_end_matches(']').parse().unwrap()));
        }
    }
    steps
}

/// Line edits of a text file: the last line cut (a partial write), lines
/// dropped, doubled, blank or garbage, and `random` lines each cut short.
pub fn line_edits(text: &str, random: usize, rng: &mut Rng) -> Mutants {
    let lines: Vec<&str> = text.lines().collect();
    let n = lines.len();
    let mut out: Mutants = Vec::new();
    let mut at = vec![0, 1.min(n - 1), n - 1, rng.below(n)];
    at.sort_unstable();
    at.dedup();
    for i in at {
        let mut dropped = lines.clone();
        dropped.remove(i);
        out.push((format!("line {} dropped", i + 1), joined(&dropped)));
        let mut doubled = lines.clone();
        doubled.insert(i, lines[i]);
        out.push((format!("line {} doubled", i + 1), joined(&doubled)));
        for (what, garbage) in [
            ("blank", ""),
            ("garbage", "\u{0}\u{1}{[,\""),
            ("lone brace", "{"),
        ] {
            let mut edited = lines.clone();
            edited.insert(i, garbage);
            out.push((
                format!("a {what} line before line {}", i + 1),
                joined(&edited),
            ));
        }
    }
    for _ in 0..random {
        let i = rng.below(n);
        let cut = floor(lines[i], rng.below(lines[i].len().max(1)));
        let mut edited = lines.clone();
        edited[i] = &lines[i][..cut];
        out.push((format!("line {} cut at {cut}", i + 1), joined(&edited)));
    }
    let last = lines[n - 1];
    let mut partial = joined(&lines[..n - 1]);
    partial.extend_from_slice(&last.as_bytes()[..floor(last, last.len() / 2)]);
    out.push(("the last line cut in half, no newline".into(), partial));
    out.push(("empty file".into(), Vec::new()));
    out.push((
        "no final newline".into(),
        text.trim_end().as_bytes().to_vec(),
    ));
    out.push((
        "CRLF line ends".into(),
        text.replace('\n', "\r\n").into_bytes(),
    ));
    out
}

/// Whole JSONL files from edits of their first line (`edits` of
/// `lines[0]`, as [`json_edits`] gives them), labelled `line 1 …`.
pub fn first_line(lines: &[&str], edits: Mutants) -> Mutants {
    edits
        .into_iter()
        .map(|(label, row)| {
            let row = String::from_utf8(row).unwrap();
            let mut edited = lines.to_vec();
            edited[0] = &row;
            (format!("line 1 {label}"), joined(&edited))
        })
        .collect()
}

/// Lines joined back, each ended by a newline.
pub fn joined(lines: &[&str]) -> Vec<u8> {
    lines
        .iter()
        .flat_map(|l| [l.as_bytes(), b"\n"])
        .flatten()
        .copied()
        .collect()
}

/// The largest char boundary of `s` at or below `at`.
fn floor(s: &str, at: usize) -> usize {
    (0..=at.min(s.len()))
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}
