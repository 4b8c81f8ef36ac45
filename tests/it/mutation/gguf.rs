//! GGUF mutants: the seed is `llama-tiny` written as llama.cpp writes it
//! (`gguf_tiny::write_llama_tiny`, Q8_0 weights, F32 norms, its embedded
//! tokenizer, `general.alignment` stated), parsed here far enough to hit
//! every field: the header's counts, each metadata entry's key length,
//! type and value, each tensor info's dims, type and offset, and the data.
//! The Qwen3, Gemma 2 and Gemma 3 files (`gguf_families`) add their
//! metadata's mutants and a sample of their norms' tensor infos. Read by
//! `inspect logits`, which loads every tensor and the tokenizer.

use candle_core::quantized::GgmlDType;
use candle_core::quantized::gguf_file::Value;

use super::mutate::{COUNTS, Mutants, Rng, counts_at, flips, put, truncations};
use super::{Case, Entry, Expect, run_cases};

/// Where one metadata entry's fields sit in the file.
struct Kv {
    key: String,
    len_at: usize,
    type_at: usize,
    value_at: usize,
    value_type: u32,
}

/// Where one tensor info's fields sit in the file.
struct Info {
    name: String,
    len_at: usize,
    dims_at: usize,
    ndims: usize,
    type_at: usize,
    offset_at: usize,
    offset: u64,
}

struct Layout {
    kvs: Vec<Kv>,
    infos: Vec<Info>,
    /// Where the tensor infos end (the data starts at the next aligned byte).
    infos_end: usize,
    data_start: usize,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Bytes of one value of GGUF type `ty` at `at` (64-bit lengths).
fn value_len(b: &[u8], at: usize, ty: u32) -> usize {
    match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        10..=12 => 8,
        8 => 8 + u64_at(b, at) as usize,
        9 => {
            let inner = u32_at(b, at);
            let n = u64_at(b, at + 4) as usize;
            let mut end = at + 12;
            for _ in 0..n {
                end += value_len(b, end, inner);
            }
            end - at
        }
        _ => panic!("the seed holds an unknown GGUF type {ty}"),
    }
}

fn parse(b: &[u8]) -> Layout {
    assert_eq!(&b[..4], b"GGUF");
    assert!(matches!(u32_at(b, 4), 2 | 3), "the seed has 64-bit lengths");
    let (tensors, entries) = (u64_at(b, 8) as usize, u64_at(b, 16) as usize);
    let mut at = 24;
    let mut kvs = Vec::new();
    for _ in 0..entries {
        let len = u64_at(b, at) as usize;
        let key = String::from_utf8(b[at + 8..at + 8 + len].to_vec()).unwrap();
        let type_at = at + 8 + len;
        let value_type = u32_at(b, type_at);
        let value_at = type_at + 4;
        kvs.push(Kv {
            key,
            len_at: at,
            type_at,
            value_at,
            value_type,
        });
        at = value_at + value_len(b, value_at, value_type);
    }
    let mut infos = Vec::new();
    for _ in 0..tensors {
        let len = u64_at(b, at) as usize;
        let name = String::from_utf8(b[at + 8..at + 8 + len].to_vec()).unwrap();
        let ndims = u32_at(b, at + 8 + len) as usize;
        let dims_at = at + 12 + len;
        let type_at = dims_at + 8 * ndims;
        let offset_at = type_at + 4;
        let offset = u64_at(b, offset_at);
        infos.push(Info {
            name,
            len_at: at,
            dims_at,
            ndims,
            type_at,
            offset_at,
            offset,
        });
        at = offset_at + 8;
    }
    Layout {
        kvs,
        infos,
        infos_end: at,
        data_start: at.div_ceil(ALIGNMENT) * ALIGNMENT,
    }
}

/// The header: magic, version and both counts.
fn header(seed: &[u8]) -> Mutants {
    let mut out: Mutants = (0..4)
        .map(|i| {
            (
                format!("magic byte {i} flipped"),
                put(seed, i, &[seed[i] ^ 0x20]),
            )
        })
        .collect();
    for v in [0u32, 1, 3, 4, u32::MAX] {
        out.push((format!("version {v}"), put(seed, 4, &v.to_le_bytes())));
    }
    for (field, at) in [("tensor count", 8), ("metadata count", 16)] {
        let n = u64_at(seed, at);
        let extra = [("count - 1", n - 1), ("count + 1", n + 1)];
        for (label, bytes) in counts_at(seed, at, 8, &extra) {
            out.push((format!("{field} {label}"), bytes));
        }
    }
    out
}

/// Hostile values for a metadata value of type `ty` (name, bytes).
fn values_for(ty: u32) -> Vec<(&'static str, Vec<u8>)> {
    let f32s = [
        ("0", 0f32),
        ("-1e-5", -1e-5),
        ("NaN", f32::NAN),
        ("inf", f32::INFINITY),
        ("-inf", f32::NEG_INFINITY),
        ("3.4e38", f32::MAX),
    ];
    match ty {
        4 | 5 => [
            ("0", 0u32),
            ("1", 1),
            ("3", 3),
            ("2^31", 1 << 31),
            ("2^32-1", u32::MAX),
        ]
        .iter()
        .map(|&(l, v)| (l, v.to_le_bytes().to_vec()))
        .collect(),
        6 => f32s
            .iter()
            .map(|&(l, v)| (l, v.to_le_bytes().to_vec()))
            .collect(),
        // 64-bit integers, and a string's or array's length (an array's
        // after its element type).
        8 | 10 | 11 => COUNTS
            .iter()
            .map(|&(l, v)| (l, v.to_le_bytes().to_vec()))
            .collect(),
        7 => vec![("2", vec![2])],
        _ => Vec::new(),
    }
}

/// Each metadata entry: its key's length, its type swapped, its value.
fn metadata(seed: &[u8], layout: &Layout, rng: &mut Rng) -> Mutants {
    let mut out = Mutants::new();
    let lengths = [("0", 0u64), ("2^64-1", u64::MAX)];
    for kv in &layout.kvs {
        let key = &kv.key;
        let len = u64_at(seed, kv.len_at);
        for (label, v) in lengths.iter().chain(&[("len + 1", len + 1)]) {
            out.push((
                format!("kv {key} key length {label}"),
                put(seed, kv.len_at, &v.to_le_bytes()),
            ));
        }
        let mut types: Vec<u32> = [0, 4, 6, 7, 8, 9, 10, 12]
            .into_iter()
            .filter(|&t| t != kv.value_type)
            .collect();
        types = rng
            .pick(types.len(), rng.more(2))
            .into_iter()
            .map(|i| types[i])
            .collect();
        for ty in types.into_iter().chain([13]) {
            out.push((
                format!("kv {key} type {ty}"),
                put(seed, kv.type_at, &ty.to_le_bytes()),
            ));
        }
        let (value_at, ty) = match kv.value_type {
            // An array: its element type, then its length like a string's.
            9 => {
                for ty in [0u32, 8, 9, 13] {
                    out.push((
                        format!("kv {key} element type {ty}"),
                        put(seed, kv.value_at, &ty.to_le_bytes()),
                    ));
                }
                (kv.value_at + 4, 8)
            }
            ty => (kv.value_at, ty),
        };
        for (label, bytes) in values_for(ty) {
            let what = if matches!(kv.value_type, 8 | 9) {
                " length"
            } else {
                ""
            };
            out.push((
                format!("kv {key}{what} = {label}"),
                put(seed, value_at, &bytes),
            ));
        }
    }
    out
}

/// Mutants of one tensor info; `all` takes every kind, else a sample.
fn tensor_info(seed: &[u8], info: &Info, all: bool, rng: &mut Rng) -> Mutants {
    let name = &info.name;
    let mut out = Mutants::new();
    for (label, bytes) in counts_at(seed, info.len_at, 8, &[]) {
        out.push((format!("tensor {name} name length {label}"), bytes));
    }
    let ndims_at = info.dims_at - 4;
    for n in [0u32, info.ndims as u32 + 1, 5, u32::MAX] {
        out.push((
            format!("tensor {name} n_dims {n}"),
            put(seed, ndims_at, &n.to_le_bytes()),
        ));
    }
    for d in 0..info.ndims {
        let at = info.dims_at + 8 * d;
        let twice = [("twice", 2 * u64_at(seed, at))];
        for (label, bytes) in counts_at(seed, at, 8, &twice) {
            out.push((format!("tensor {name} dim {d} {label}"), bytes));
        }
    }
    for ty in [0u32, 1, 2, 8, 12, 14, 30, 4, 99, u32::MAX] {
        out.push((
            format!("tensor {name} type {ty}"),
            put(seed, info.type_at, &ty.to_le_bytes()),
        ));
    }
    let offsets = [
        ("+ 32 (aligned, overlapping)", info.offset + 32),
        ("2^31", 1 << 31),
        ("2^62", 1 << 62),
        ("2^64-1", u64::MAX),
        ("the file's length", seed.len() as u64),
    ];
    for (label, v) in offsets {
        out.push((
            format!("tensor {name} offset {label}"),
            put(seed, info.offset_at, &v.to_le_bytes()),
        ));
    }
    if !all {
        let keep = rng.pick(out.len(), rng.more(3));
        out = keep
            .into_iter()
            .map(|i| std::mem::take(&mut out[i]))
            .collect();
    }
    out
}

/// The data: NaN written into tensors, cuts at every field, flips.
fn data(seed: &[u8], layout: &Layout, rng: &mut Rng) -> Mutants {
    let mut out = Mutants::new();
    for info in layout.infos.iter().take(6) {
        let at = layout.data_start + info.offset as usize;
        // An F32 tensor's first value, or a Q8_0 block's f16 scale.
        let nan = if u32_at(seed, info.type_at) == 0 {
            f32::NAN.to_le_bytes().to_vec()
        } else {
            vec![0x00, 0x7e]
        };
        out.push((
            format!("tensor {} data starts with NaN", info.name),
            put(seed, at, &nan),
        ));
    }
    let mut points: Vec<usize> = layout.kvs.iter().map(|k| k.value_at).collect();
    points.extend(layout.infos.iter().step_by(3).map(|i| i.offset_at));
    points.extend([layout.infos_end, layout.data_start, layout.data_start + 1]);
    out.extend(truncations(seed, &points, rng.more(10), rng));
    out.extend(flips(seed, 0..layout.data_start, rng.more(20), rng));
    out.extend(flips(
        seed,
        layout.data_start..seed.len(),
        rng.more(10),
        rng,
    ));
    out
}

/// The known misalignment: the first tensor moved off the alignment.
fn misaligned(seed: &[u8], layout: &Layout) -> Mutants {
    let first = &layout.infos[0];
    assert_eq!(first.offset, 0, "the seed's first tensor starts the data");
    [1u64, 16]
        .iter()
        .map(|&d| {
            let label = format!(
                "tensor {} offset + {d} (not a multiple of general.alignment)",
                first.name
            );
            (
                label,
                put(seed, first.offset_at, &(first.offset + d).to_le_bytes()),
            )
        })
        .collect()
}

/// Tensors that get every kind of tensor-info mutant (the others a
/// sample): a quantized matrix, an F32 norm, the embedding and the rope
/// factors (read before the weights, by the config).
const EVERY_KIND: &[&str] = &[
    "token_embd.weight",
    "output_norm.weight",
    "blk.0.attn_q.weight",
    "rope_freqs.weight",
];

/// Mutants that must be rejected, not loaded silently: a file that claims
/// what it does not hold is an error, never a model.
fn must_reject(name: &str) -> bool {
    let capped = [
        "attn_logit_softcapping",
        "final_logit_softcapping",
        "rope.scaling.factor",
    ];
    let hostile = ["0", "-1e-5", "NaN", "inf", "-inf"];
    name.contains("not a multiple of general.alignment")
        || name.ends_with("rope.freq_base = NaN")
        || name.ends_with("rope.freq_base = inf")
        || name.ends_with("rms_epsilon = 0")
        || name.ends_with("rms_epsilon = -1e-5")
        || name.ends_with("attention.sliding_window = 0")
        || capped.iter().any(|k| {
            hostile
                .iter()
                .any(|v| name.ends_with(&format!("{k} = {v}")))
        })
}

/// The Qwen3, Gemma 2 and Gemma 3 files (`gguf_families`): each seed,
/// every metadata entry's mutants (their windows, soft-caps and rope
/// scaling among them), and a sample of their q/k and sandwich norms'
/// tensor infos.
fn family_mutants(rng: &mut Rng) -> Mutants {
    let dir = crate::common::scratch("mutation", "gguf-family-seeds");
    let mut out = Mutants::new();
    for (fixture, arch) in crate::gguf_families::FILES {
        let path = dir.join(format!("{arch}.gguf"));
        crate::gguf_families::write_gguf(fixture, arch, GgmlDType::F32, &path);
        let seed = std::fs::read(&path).unwrap();
        let layout = parse(&seed);
        let mut mutants = vec![("seed".to_string(), seed.clone())];
        mutants.extend(metadata(&seed, &layout, rng));
        for info in &layout.infos {
            if info.name.starts_with("blk.0.") && info.name.ends_with("norm.weight") {
                mutants.extend(tensor_info(&seed, info, false, rng));
            }
        }
        out.extend(
            mutants
                .into_iter()
                .map(|(label, bytes)| (format!("{arch} {label}"), bytes)),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// The data's alignment, as the seed states it in `general.alignment`.
const ALIGNMENT: usize = 32;

/// The seed, written (and read back) in a scratch folder.
fn seed_file() -> Vec<u8> {
    let dir = crate::common::scratch("mutation", "gguf-seed");
    let path = dir.join("seed.gguf");
    crate::gguf_tiny::write_llama_tiny(&path, GgmlDType::Q8_0, |m| {
        m.push(("general.alignment".into(), Value::U32(ALIGNMENT as u32)));
    });
    let bytes = std::fs::read(path).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    bytes
}

#[test]
fn gguf_mutants_end_cleanly() {
    run_cases("gguf", cases(1));
}

/// The seed and its mutants; `scale` draws that many times more.
pub fn cases(scale: usize) -> Vec<Case> {
    let seed = seed_file();
    let layout = parse(&seed);
    let mut rng = Rng::new(0x6767_7566, scale);
    let mut mutants: Mutants = vec![("seed".into(), seed.clone())];
    mutants.extend(header(&seed));
    mutants.extend(metadata(&seed, &layout, &mut rng));
    for info in &layout.infos {
        let all = EVERY_KIND.contains(&info.name.as_str());
        mutants.extend(tensor_info(&seed, info, all, &mut rng));
    }
    mutants.extend(misaligned(&seed, &layout));
    mutants.extend(data(&seed, &layout, &mut rng));
    mutants.extend(family_mutants(&mut rng));
    mutants
        .into_iter()
        .map(|(label, bytes)| {
            let name = format!("gguf: {label}");
            let expect = match label.as_str() {
                _ if label == "seed" || label.ends_with(" seed") => Expect::Success,
                _ if must_reject(&name) => Expect::Rejected,
                _ => Expect::Clean,
            };
            let files = vec![("m.gguf".to_string(), Entry::Bytes(bytes))];
            // The family files' tokens are placeholders: ids, not text.
            let family = crate::gguf_families::FILES
                .iter()
                .any(|(_, arch)| label.starts_with(&format!("{arch} ")));
            let input = if family {
                ["--ids", "1,5,7"]
            } else {
                ["--text", ".,"]
            };
            let args = [
                "inspect",
                "logits",
                "--model",
                "{dir}/m.gguf",
                input[0],
                input[1],
                "--top",
                "3",
            ];
            Case::new(name, files, &args).expect(expect)
        })
        .collect()
}
