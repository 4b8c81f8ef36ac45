//! Name → scheme. Schemes are written `name` or `name:key=value:key=value`
//! (`is:m=20:s=10`, `spectr:rho=1.6`); lists are comma-separated.

use super::RaceTree;
use super::baselines::{Nss, SdFirst};
use super::block::Block;
use super::greedy::Greedy;
use super::importance::{DEFAULT_ALPHABET, DEFAULT_LP, ImportanceSampling};
use super::optimal::global::{DEFAULT_SET_BUDGET, DEFAULT_TOLERANCE, GrSettings};
use super::optimal::{Optimal, OptimalMode};
use super::race::Ersd;
use super::rsd::Rsd;
use super::single::Single;
use super::specinfer::SpecInfer;
use super::spectr::SpecTr;
use super::weighted::{Variant, WeightedIs};
use super::{DraftLaw, Scheme, SchemeError, fail};

/// One parameter of a scheme.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ParamInfo {
    pub name: &'static str,
    pub default: String,
    pub help: &'static str,
}

/// What `specbench schemes` prints about one scheme.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SchemeInfo {
    pub id: &'static str,
    pub summary: &'static str,
    pub params: Vec<ParamInfo>,
    /// Which drafts it accepts: identical only, or identical and non-identical.
    pub drafts: &'static str,
    pub k: &'static str,
    pub draft_law: DraftLaw,
    /// Closed-form landing probability, where one exists.
    pub acceptance: &'static str,
}

fn alphabet_param() -> ParamInfo {
    ParamInfo {
        name: "m",
        default: DEFAULT_ALPHABET.to_string(),
        help: "alphabet size |Ω′|: draftable tokens ranked by p − q1·q2 that get pair weights",
    }
}

/// Every scheme, in the order tables list them.
pub fn catalogue() -> Vec<SchemeInfo> {
    let both = "identical, non-identical";
    let identical = "identical only";
    let info = |id, summary, params, drafts, k, draft_law, acceptance| SchemeInfo {
        id,
        summary,
        params,
        drafts,
        k,
        draft_law,
        acceptance,
    };
    let mut schemes = vec![
        info(
            "single",
            "single-draft speculative sampling (Leviathan et al.); alias sd",
            vec![],
            "-",
            "1",
            DraftLaw::Independent,
            "1 − TV(p, q)",
        ),
        info(
            "nss",
            "baseline: ignore the drafts, sample p",
            vec![],
            both,
            ">= 1",
            DraftLaw::Independent,
            "Σ p (1 − Π (1 − q_k))",
        ),
        info(
            "sd_first",
            "baseline: SD on the first draft; the residual may land on another",
            vec![],
            both,
            ">= 1",
            DraftLaw::Independent,
            "Σ min(p, q_1) + Σ (p − q_1)_+ (1 − Π_{k≥2} (1 − q_k))",
        ),
        info(
            "specinfer",
            "SpecInfer: recursive rejection sampling with replacement",
            vec![],
            both,
            ">= 1",
            DraftLaw::Independent,
            "1 − Π TV(r_i, q_i)",
        ),
        info(
            "rsd",
            "recursive rejection sampling without replacement (Jeon et al.)",
            vec![],
            identical,
            "1 .. |supp q|",
            DraftLaw::WithoutReplacement,
            "none (enumerated)",
        ),
        info(
            "spectr",
            "SpecTr K-SEQ with ρ* by bisection (rounded up) and the exact residual",
            vec![ParamInfo {
                name: "rho",
                default: "ρ*".into(),
                help: "fixed ρ; must be >= ρ* at every node",
            }],
            identical,
            ">= 1",
            DraftLaw::Independent,
            "1 − (1 − β(ρ*))^K",
        ),
        info(
            "is",
            "the paper's IS: truncated LP (max-flow) on the alphabet, tournament for K > 2",
            vec![
                alphabet_param(),
                ParamInfo {
                    name: "s",
                    default: DEFAULT_LP.to_string(),
                    help: "LP block: the s best alphabet tokens get LP pair weights",
                },
            ],
            both,
            ">= 1",
            DraftLaw::Independent,
            "selection: Σ min(p, p_I)",
        ),
        info(
            "greedy",
            "Hu et al.: K−1 most likely tokens plus one sampled from the rest",
            vec![],
            identical,
            ">= 1",
            DraftLaw::Greedy,
            "p(D) + Σ_{z∉D} min(p, q′)",
        ),
        info(
            "optimal",
            "sampler attaining P*: Global Resolution (exact mode) for identical drafts, max-flow oracle for non-identical; counted exact fallbacks",
            vec![
                ParamInfo {
                    name: "sets",
                    default: DEFAULT_SET_BUDGET.to_string(),
                    help: "input sets per Luce program; tokens beyond it share a tail item",
                },
                ParamInfo {
                    name: "tol",
                    default: format!("{DEFAULT_TOLERANCE:e}"),
                    help: "L1 gradient target and the acceptance gap to P* that counts as optimal",
                },
                ParamInfo {
                    name: "mode",
                    default: "window".into(),
                    help: "window (max-coordinate windows: P* at every node, exact), luce (Global Resolution exact mode; groups tokens above the set budget and gives acceptance away) or paper (GR's slice with rejection: law p only at convergence; nodes off by more than tol count as fallbacks)",
                },
            ],
            both,
            ">= 1",
            DraftLaw::Independent,
            "P*",
        ),
        info(
            "ersd",
            "exponential races (Kobus & Gündüz): drafts are the first arrivals, the target's race winner is emitted",
            vec![ParamInfo {
                name: "tree",
                default: "chains".into(),
                help: "chains (K chains of L tokens) or optimal (τ* of K·L nodes for the rank law measured so far in the generation)",
            }],
            identical,
            ">= 1",
            DraftLaw::WithoutReplacement,
            "Pr[R ≤ K] (rank law of the target winner)",
        ),
        info(
            "block",
            "block verification (Sun et al.) of one draft chain; keeps the last success",
            vec![],
            "-",
            "1",
            DraftLaw::Independent,
            "≥ SD's per round (no simple form); 1 − TV at one node",
        ),
    ];
    for variant in Variant::ALL {
        let (summary, params) = match variant {
            Variant::Ratio => (
                "two-step with weights p/q_i (self-normalised IS)",
                vec![alphabet_param()],
            ),
            Variant::Target => ("two-step with weights p", vec![alphabet_param()]),
            Variant::Uniform => ("two-step choosing either input w.p. ½ per stage", vec![]),
            Variant::First => (
                "two-step always choosing the first input (p_I = q_1)",
                vec![],
            ),
            Variant::Priority => (
                "two-step keeping the input with the larger p − q1·q2 (is at s = 1)",
                vec![alphabet_param()],
            ),
        };
        schemes.push(info(
            variant.id(),
            summary,
            params,
            both,
            ">= 1",
            DraftLaw::Independent,
            "selection: Σ min(p, p_I)",
        ));
    }
    schemes
}

/// Builds one scheme from `name[:key=value…]`.
pub fn build(spec: &str) -> Result<Box<dyn Scheme>, SchemeError> {
    let mut parts = spec.trim().split(':');
    let name = parts.next().unwrap_or_default();
    let mut params: Vec<(&str, &str)> = Vec::new();
    for part in parts {
        match part.split_once('=') {
            Some((key, value)) => params.push((key.trim(), value.trim())),
            None => {
                return fail(format!(
                    "scheme parameter '{part}' in '{spec}' is not key=value: write e.g. is:m=40:s=5"
                ));
            }
        }
    }
    let known: Vec<&str> = catalogue()
        .iter()
        .find(|info| info.id == name || (name == "sd" && info.id == "single"))
        .map(|info| info.params.iter().map(|p| p.name).collect())
        .ok_or_else(|| {
            let names: Vec<&str> = catalogue().iter().map(|info| info.id).collect();
            SchemeError::new(format!(
                "unknown scheme '{name}': choose from {} (see `specbench schemes`)",
                names.join(", ")
            ))
        })?;
    for (key, _) in &params {
        if !known.contains(key) {
            let takes = if known.is_empty() {
                "no parameters".to_string()
            } else {
                format!("parameters {}", known.join(", "))
            };
            return fail(format!(
                "scheme {name} has no parameter '{key}': it takes {takes}"
            ));
        }
    }
    let get = |key: &str| {
        params
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    };
    let whole = |key: &str, default: usize| -> Result<usize, SchemeError> {
        match get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                SchemeError::new(format!("{name}:{key}={v}: {key} must be a whole number"))
            }),
        }
    };
    let scheme: Box<dyn Scheme> = match name {
        "single" | "sd" => Box::new(Single),
        "nss" => Box::new(Nss),
        "sd_first" => Box::new(SdFirst),
        "specinfer" => Box::new(SpecInfer),
        "rsd" => Box::new(Rsd),
        "spectr" => {
            let rho = match get("rho") {
                None => None,
                Some(v) => match v.parse::<f64>() {
                    Ok(rho) if rho.is_finite() && rho >= 1.0 => Some(rho),
                    _ => return fail(format!("spectr:rho={v}: rho must be a number >= 1")),
                },
            };
            Box::new(SpecTr { rho })
        }
        "is" => Box::new(ImportanceSampling::new(
            whole("m", DEFAULT_ALPHABET)?,
            whole("s", DEFAULT_LP)?,
        )?),
        "greedy" => Box::new(Greedy),
        "ersd" => {
            let tree = match get("tree") {
                None | Some("chains") => RaceTree::Chains,
                Some("optimal") => RaceTree::Optimal,
                Some(v) => return fail(format!("ersd:tree={v}: tree must be chains or optimal")),
            };
            Box::new(Ersd { tree })
        }
        "block" => Box::new(Block),
        "optimal" => {
            let tolerance = match get("tol") {
                None => DEFAULT_TOLERANCE,
                Some(v) => match v.parse::<f64>() {
                    Ok(t) if t.is_finite() && t > 0.0 => t,
                    _ => return fail(format!("optimal:tol={v}: tol must be a number > 0")),
                },
            };
            let set_budget = whole("sets", DEFAULT_SET_BUDGET)?;
            if set_budget == 0 {
                return fail("optimal:sets=0: the set budget must be at least 1");
            }
            let mode = match get("mode") {
                None | Some("window") | Some("exact") => OptimalMode::Window,
                Some("luce") => OptimalMode::Luce,
                Some("paper") => OptimalMode::Paper,
                Some(v) => {
                    return fail(format!(
                        "optimal:mode={v}: mode must be window (default), luce or paper"
                    ));
                }
            };
            Box::new(Optimal {
                settings: GrSettings {
                    tolerance,
                    set_budget,
                    ..GrSettings::default()
                },
                mode,
            })
        }
        other => {
            let variant = Variant::ALL
                .into_iter()
                .find(|v| v.id() == other)
                .expect("catalogued");
            Box::new(WeightedIs::new(variant, whole("m", DEFAULT_ALPHABET)?)?)
        }
    };
    Ok(scheme)
}

/// Builds a comma-separated list; `all` means every catalogued scheme.
pub fn build_list(list: &str) -> Result<Vec<Box<dyn Scheme>>, SchemeError> {
    if list.trim() == "all" {
        return catalogue().iter().map(|info| build(info.id)).collect();
    }
    let schemes: Vec<Box<dyn Scheme>> = list
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(build)
        .collect::<Result<_, _>>()?;
    if schemes.is_empty() {
        return fail("no scheme named: give e.g. --schemes single,specinfer,is");
    }
    Ok(schemes)
}

/// The `specbench schemes` table.
pub fn catalogue_table(schemes: &[SchemeInfo]) -> String {
    let mut out = String::new();
    for info in schemes {
        out.push_str(&format!("{:<12} {}\n", info.id, info.summary));
        out.push_str(&format!(
            "{:<12} drafts: {}; K: {}; draft law: {}; acceptance: {}\n",
            "",
            info.drafts,
            info.k,
            info.draft_law.describe(),
            info.acceptance
        ));
        for param in &info.params {
            out.push_str(&format!(
                "{:<12} {}={} — {}\n",
                "", param.name, param.default, param.help
            ));
        }
        out.push('\n');
    }
    out.push_str(
        "Write parameters as name:key=value, e.g. is:m=20:s=10; lists are comma-separated.\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalogued_scheme_builds_with_defaults_and_keeps_its_name() {
        for info in catalogue() {
            let scheme = build(info.id).unwrap();
            assert_eq!(scheme.id(), info.id);
            assert_eq!(scheme.draft_law(), info.draft_law);
        }
        assert_eq!(build("sd").unwrap().id(), "single");
    }

    #[test]
    fn parameters_parse_and_bad_ones_say_what_to_write() {
        assert_eq!(build("is:m=20:s=10").unwrap().label(), "is:m=20:s=10");
        assert_eq!(build("spectr:rho=1.6").unwrap().label(), "spectr:rho=1.6");
        for (spec, needle) in [
            ("foo", "unknown scheme 'foo'"),
            ("is:x=1", "no parameter 'x'"),
            ("is:m", "not key=value"),
            ("is:m=abc", "whole number"),
            ("is:m=5:s=6", "1 <= s <= m"),
            ("spectr:rho=0.5", ">= 1"),
            ("single:m=3", "no parameters"),
        ] {
            let err = build(spec).unwrap_err();
            assert!(err.message.contains(needle), "{spec}: {err}");
        }
    }

    #[test]
    fn lists_and_all() {
        assert_eq!(build_list("single, specinfer").unwrap().len(), 2);
        assert_eq!(build_list("all").unwrap().len(), catalogue().len());
        assert!(build_list(" , ").is_err());
    }
}
