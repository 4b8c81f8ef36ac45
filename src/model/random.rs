//! `random:opt-<size>[@seed]` models: the public OPT shapes with random
//! weights (`opt::random_opt`), for timing and plumbing runs where no
//! checkpoint can or need be downloaded — `specbench run --target
//! random:opt-13b --draft random:opt-125m --device cuda --dtype f16`. The
//! text goes through [`ByteTokenizer`]; the seed and shape are recorded in
//! the manifest, so a run is reproducible from it.

use anyhow::{Result, bail};

use super::device::{meminfo_bytes, read_meminfo};
use super::opt::{opt_shape, parameter_count, random_opt};
use super::tokenize::ByteTokenizer;
use super::{CausalLm, ModelPair, PairSpec};

const PREFIX: &str = "random:";

/// Seeds when the spec names none: different for target and draft so the
/// pair is not one model twice.
const TARGET_SEED: u64 = 0;
const DRAFT_SEED: u64 = 1;

pub fn is_random(spec: &str) -> bool {
    spec.starts_with(PREFIX)
}

/// `random:opt-13b@7` → `("13b", 7)`; without `@`, `default_seed`.
pub fn parse_spec(spec: &str, default_seed: u64) -> Result<(String, u64)> {
    let usage = "use random:opt-<size>[@seed], e.g. random:opt-13b or random:opt-125m@3";
    let Some(rest) = spec
        .strip_prefix(PREFIX)
        .and_then(|r| r.strip_prefix("opt-"))
    else {
        bail!("model '{spec}': {usage}");
    };
    let (size, seed) = match rest.split_once('@') {
        Some((size, seed)) => match seed.parse::<u64>() {
            Ok(seed) => (size, seed),
            Err(_) => bail!("model '{spec}': the seed '{seed}' is not a number: {usage}"),
        },
        None => (rest, default_seed),
    };
    if opt_shape(size).is_err() {
        bail!(
            "model '{spec}': OPT has no size '{size}': use random:opt-<size> with 125m, 350m, 1.3b, 2.7b, 6.7b, 13b, 30b or 66b"
        );
    }
    Ok((size.to_string(), seed))
}

/// Both models random (a random model beside a checkpoint is refused:
/// their vocabularies and tokenizers would not agree).
pub fn load_random_pair(spec: &PairSpec) -> Result<ModelPair> {
    if !(is_random(&spec.target.name) && is_random(&spec.draft.name)) {
        bail!(
            "'{}' and '{}': a random-weight model pairs only with another (random:opt-<size> for both)",
            spec.target.name,
            spec.draft.name
        );
    }
    let (target_size, target_seed) = parse_spec(&spec.target.name, TARGET_SEED)?;
    let (draft_size, draft_seed) = parse_spec(&spec.draft.name, DRAFT_SEED)?;
    let open = |side: &super::ModelSpec| side.device.single("a random:opt model")?.open();
    let (target_device, target_dtype) = (open(&spec.target)?, spec.target.precision().dtype());
    let (draft_device, draft_dtype) = (open(&spec.draft)?, spec.draft.precision().dtype());
    let host_bytes = |size: &str, device: &candle_core::Device, dtype: candle_core::DType| {
        Ok::<_, anyhow::Error>(if device.is_cpu() {
            parameter_count(&opt_shape(size)?)? * dtype.size_in_bytes()
        } else {
            0
        })
    };
    let bytes = host_bytes(&target_size, &target_device, target_dtype)?
        + host_bytes(&draft_size, &draft_device, draft_dtype)?;
    if bytes > 0 {
        check_host_memory(bytes, spec)?;
    }
    let load = |size: &str,
                seed: u64,
                device: &candle_core::Device,
                dtype: candle_core::DType|
     -> Result<Box<dyn CausalLm>> {
        Ok(Box::new(random_opt(opt_shape(size)?, device, dtype, seed)?))
    };
    Ok(ModelPair {
        target: load(&target_size, target_seed, &target_device, target_dtype)?,
        draft: load(&draft_size, draft_seed, &draft_device, draft_dtype)?,
        tokenizer: Box::new(ByteTokenizer),
    })
}

/// Refuses up front what the kernel would kill half-way through drawing
/// the weights (Linux: `MemAvailable`; elsewhere nothing is checked).
fn check_host_memory(bytes: usize, spec: &PairSpec) -> Result<()> {
    let Some(available) = read_meminfo()
        .and_then(|text| meminfo_bytes(&text, "MemAvailable"))
        .map(|bytes| bytes as usize)
    else {
        return Ok(());
    };
    if bytes > available {
        bail!(
            "'{}' and '{}' need {:.1} GB of weights but this machine has {:.1} GB available: use --dtype f16, smaller shapes or --device cuda",
            spec.target.name,
            spec.draft.name,
            bytes as f64 / 1e9,
            available as f64 / 1e9
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_a_public_shape_and_an_optional_seed() {
        assert_eq!(parse_spec("random:opt-13b", 0).unwrap(), ("13b".into(), 0));
        assert_eq!(
            parse_spec("random:opt-125m@7", 1).unwrap(),
            ("125m".into(), 7)
        );
        for bad in [
            "random:opt-12b",
            "random:llama-1b",
            "random:opt-125m@x",
            "opt-125m",
        ] {
            let err = parse_spec(bad, 0).unwrap_err().to_string();
            assert!(err.contains(bad) && err.contains("use "), "{err}");
        }
    }

    #[test]
    fn available_memory_is_read_from_meminfo() {
        let text = "MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(meminfo_bytes(text, "MemAvailable"), Some(20_000_000 * 1024));
        assert_eq!(meminfo_bytes("MemTotal: 1 kB\n", "MemAvailable"), None);
        // OPT-13B is 12.85 billion weights (the name rounds up).
        assert_eq!(
            parameter_count(&opt_shape("13b").unwrap()).unwrap() / 10_000_000,
            1285
        );
    }
}
