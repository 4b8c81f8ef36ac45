//! `specbench theory accept`: each scheme's exact landing probability
//! `Pr[Y ∈ inputs]` at one node, next to `P*`.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::laws::Dist;
use crate::select::ersd::{landing_probability, rank_law};
use crate::select::gls::law::landing as gls_landing;
use crate::select::{Decoding, DraftLaw, Drafts, Scheme, build, catalogue, drafts_for};

use super::{ENUMERATION_LIMIT, exact_outcome, optimum};

/// The node: target `p`, one draft law (K identical drafts) or K of them.
#[derive(Clone, Debug)]
pub struct AcceptRequest {
    pub p: Vec<f64>,
    pub qs: Vec<Vec<f64>>,
    pub k: usize,
    /// Comma-separated scheme names; `None`: every scheme that applies.
    pub schemes: Option<String>,
}

/// How a landing probability was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Full enumeration of the input tuples (the closed form, where one exists, agrees to 1e-12).
    Enumerated,
    /// The scheme's closed form (the tuple space was too large to enumerate).
    ClosedForm,
    /// ERSD: `Pr[R ≤ K]` from the rank law of the target's race winner.
    RankLaw,
    /// GLS: the exact node law of its shared noise, integrated term by term.
    ListLaw,
    /// GLS past the expansion's size limit: the same integral by
    /// quadrature (~1e-12).
    ListQuadrature,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct AcceptRow {
    /// The scheme as requested (`is`, `is:m=20:s=5`, …).
    pub scheme: String,
    pub draft_law: DraftLaw,
    /// Number of drafts the scheme ran with (1 for `single`).
    pub drafts: usize,
    pub landing: f64,
    pub method: Method,
    pub selection: Option<f64>,
    /// The optimum for this row's draft law (`P*` for independent drafts).
    pub optimum: Option<f64>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct AcceptReport {
    pub pstar: f64,
    pub k: usize,
    pub identical: bool,
    pub rows: Vec<AcceptRow>,
}

impl AcceptReport {
    /// One object: `optimal` → `P*`, then each scheme → landing probability.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("optimal".into(), Value::from(self.pstar));
        for row in &self.rows {
            map.insert(row.scheme.clone(), Value::from(row.landing));
        }
        Value::Object(map)
    }

    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let drafts = if self.identical {
            "identical"
        } else {
            "non-identical"
        };
        let _ = writeln!(
            out,
            "K = {} {drafts} drafts; landing = Pr[Y ∈ inputs]\n",
            self.k
        );
        let _ = writeln!(
            out,
            "{:<16} {:<26} {:>10} {:>10} {:>10}  method",
            "scheme", "draft law", "landing", "selection", "optimum"
        );
        let _ = writeln!(
            out,
            "{:<16} {:<26} {:>10.6} {:>10} {:>10.6}  min-cut",
            "optimal (P*)", "independent", self.pstar, "-", self.pstar
        );
        for row in &self.rows {
            let law = format!("{} (K={})", row.draft_law.describe(), row.drafts);
            let selection = row.selection.map_or("-".into(), |s| format!("{s:.6}"));
            let optimum = row.optimum.map_or("-".into(), |s| format!("{s:.6}"));
            let method = match row.method {
                Method::Enumerated => "enumerated",
                Method::ClosedForm => "closed form",
                Method::RankLaw => "rank law",
                Method::ListLaw => "list law",
                Method::ListQuadrature => "list law (quadrature)",
            };
            let _ = writeln!(
                out,
                "{:<16} {:<26} {:>10.6} {:>10} {:>10}  {method}",
                row.scheme, law, row.landing, selection, optimum
            );
        }
        out
    }
}

/// Parses `0.2,0.3,…` or `@file.json` (a JSON array of numbers).
pub fn parse_probabilities(text: &str, what: &str) -> Result<Vec<f64>, String> {
    if let Some(path) = text.strip_prefix('@') {
        let raw = std::fs::read_to_string(path)
            .map_err(|e| format!("{what}: cannot read {path}: {e}: give an existing JSON file"))?;
        return serde_json::from_str::<Vec<f64>>(&raw).map_err(|e| {
            format!("{what}: {path} is not a JSON array of numbers ({e}): write e.g. [0.5, 0.5]")
        });
    }
    text.split(',')
        .map(|field| {
            field.trim().parse::<f64>().map_err(|_| {
                format!("{what}: '{}' is not a number: write comma-separated probabilities like 0.5,0.3,0.2", field.trim())
            })
        })
        .collect()
}

fn validated(values: &[f64], what: &str) -> Result<Dist, String> {
    Dist::new(values.to_vec()).map_err(|e| format!("{what}: {e}"))
}

/// Computes the report, validating the request first (one-line errors).
pub fn accept(request: &AcceptRequest) -> Result<AcceptReport, String> {
    if request.k < 1 {
        return Err("-k must be at least 1".into());
    }
    if request.qs.is_empty() {
        return Err("give the draft law with --q (one --q for identical drafts, K of them for non-identical)".into());
    }
    if request.qs.len() != 1 && request.qs.len() != request.k {
        return Err(format!(
            "{} --q given for K = {}: give one --q (identical drafts) or K of them (non-identical)",
            request.qs.len(),
            request.k
        ));
    }
    let p = validated(&request.p, "--p")?;
    let mut qs = Vec::with_capacity(request.qs.len());
    for (i, q) in request.qs.iter().enumerate() {
        let what = format!("--q #{}", i + 1);
        if q.len() != request.p.len() {
            return Err(format!(
                "{what} has {} entries but --p has {}: give vectors of one length",
                q.len(),
                request.p.len()
            ));
        }
        qs.push(validated(q, &what)?);
    }
    let drafts = if qs.len() == 1 {
        Drafts::identical(&qs[0], request.k)
    } else {
        Drafts::independent(qs.iter().collect())
    };
    let pstar = optimum(&p, &drafts, DraftLaw::Independent).map_err(|e| format!("P*: {e}"))?;

    let requested: Vec<String> = match &request.schemes {
        Some(list) => list
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        // The oracle sampler's landing is P* by construction: listed only on request.
        None => catalogue()
            .iter()
            .filter(|i| i.id != "optimal")
            .map(|i| i.id.to_string())
            .collect(),
    };
    if requested.is_empty() {
        return Err(
            "--schemes is empty: name at least one scheme, e.g. --schemes single,specinfer".into(),
        );
    }
    let explicit = request.schemes.is_some();
    // A row's drafts are the first k of the node's, so (draft law, k) fixes
    // its optimum; non-identical optima enumerate input sets: compute each once.
    let mut optima: Vec<(DraftLaw, usize, Option<f64>)> =
        vec![(DraftLaw::Independent, drafts.k(), Some(pstar))];
    let mut rows = Vec::with_capacity(requested.len());
    for name in requested {
        let scheme = build(&name).map_err(|e| e.to_string())?;
        // `single` is the one-draft baseline: it runs on the first draft alone.
        let node_drafts = drafts_for(scheme.as_ref(), &drafts);
        if let Err(e) = scheme.supports(&node_drafts) {
            if explicit {
                return Err(e.to_string());
            }
            continue;
        }
        let law = scheme.draft_law();
        let best = match optima.iter().find(|o| o.0 == law && o.1 == node_drafts.k()) {
            Some(cached) => cached.2,
            None => {
                let best = optimum(&p, &node_drafts, law).ok();
                optima.push((law, node_drafts.k(), best));
                best
            }
        };
        rows.push(row(&name, scheme.as_ref(), &p, &node_drafts, best)?);
    }
    Ok(AcceptReport {
        pstar,
        k: request.k,
        identical: drafts.is_identical(),
        rows,
    })
}

fn row(
    name: &str,
    scheme: &dyn Scheme,
    p: &Dist,
    drafts: &Drafts,
    optimum: Option<f64>,
) -> Result<AcceptRow, String> {
    let law = scheme.draft_law();
    let context = |e: crate::select::SchemeError| format!("{name}: {e}");
    let shared = |landing, method| AcceptRow {
        scheme: name.to_string(),
        draft_law: law,
        drafts: drafts.k(),
        landing,
        method,
        selection: None,
        optimum,
    };
    match scheme.decoding() {
        Decoding::Race(_) => {
            let ranks = rank_law(p, drafts.law(0), drafts.k());
            let landing = landing_probability(&ranks, drafts.k());
            return Ok(shared(landing, Method::RankLaw));
        }
        Decoding::Lists => {
            let (landing, exact) = gls_landing(p, drafts);
            let method = match exact {
                true => Method::ListLaw,
                false => Method::ListQuadrature,
            };
            return Ok(shared(landing, method));
        }
        Decoding::Walk | Decoding::Paths(_) => {}
    }
    let (landing, method, selection) = match exact_outcome(scheme, p, drafts) {
        Ok(exact) => (exact.landing, Method::Enumerated, exact.selection),
        Err(too_large) => {
            let node = scheme.prepare(p, drafts).map_err(context)?;
            match node.acceptance() {
                Some(closed) => (closed, Method::ClosedForm, node.selection_acceptance()),
                None => {
                    return Err(format!(
                        "{name} has no closed-form landing probability and {too_large} (limit {ENUMERATION_LIMIT:.0e})"
                    ));
                }
            }
        }
    };
    Ok(AcceptRow {
        scheme: name.to_string(),
        draft_law: law,
        drafts: drafts.k(),
        landing,
        method,
        selection,
        optimum,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(p: &str, qs: &[&str], k: usize, schemes: Option<&str>) -> AcceptRequest {
        AcceptRequest {
            p: parse_probabilities(p, "--p").unwrap(),
            qs: qs
                .iter()
                .map(|q| parse_probabilities(q, "--q").unwrap())
                .collect(),
            k,
            schemes: schemes.map(str::to_string),
        }
    }

    const P7: &str = "0.35,0.25,0.15,0.10,0.08,0.05,0.02";
    const Q7: &str = "0.20,0.30,0.05,0.15,0.10,0.15,0.05";

    #[test]
    fn the_issue_example_gives_the_reference_values() {
        let report = accept(&request(P7, &[Q7], 2, None)).unwrap();
        let json = report.to_json();
        assert!((json["optimal"].as_f64().unwrap() - 0.9375).abs() < 1e-12);
        assert!((json["single"].as_f64().unwrap() - 0.75).abs() < 1e-12);
        assert!((json["specinfer"].as_f64().unwrap() - 0.8125).abs() < 1e-12);
        for key in ["spectr", "rsd", "is", "greedy", "nss", "sd_first"] {
            assert!(json.get(key).is_some(), "{key} missing");
        }
        for row in &report.rows {
            assert!(
                row.landing <= row.optimum.unwrap() + 1e-12,
                "{}",
                row.scheme
            );
        }
    }

    #[test]
    fn non_identical_drafts_drop_identical_only_schemes_unless_asked() {
        let q2 = "0.05,0.10,0.30,0.05,0.20,0.10,0.20";
        let report = accept(&request(P7, &[Q7, q2], 2, None)).unwrap();
        assert!((report.pstar - 0.89).abs() < 1e-12);
        assert!(report.rows.iter().all(|r| r.scheme != "spectr"));
        let err = accept(&request(P7, &[Q7, q2], 2, Some("spectr"))).unwrap_err();
        assert!(err.contains("identical"), "{err}");
    }

    #[test]
    fn bad_input_gets_one_line_errors() {
        let cases = [
            (request("0.5,0.4", &["0.5,0.5"], 2, None), "sum to"),
            (request("0.5,0.5", &["0.5,0.5,0.0"], 2, None), "one length"),
            (request("1.5,-0.5", &["0.5,0.5"], 2, None), "negative"),
            (request("0.5,0.5", &["0.5,0.5"], 0, None), "at least 1"),
            (
                request("0.5,0.5", &["0.5,0.5", "0.5,0.5"], 3, None),
                "one --q",
            ),
        ];
        for (req, needle) in cases {
            let err = accept(&req).unwrap_err();
            assert!(err.contains(needle) && !err.contains('\n'), "{err}");
        }
        assert!(
            parse_probabilities("0.5,x", "--p")
                .unwrap_err()
                .contains("'x'")
        );
        assert!(
            parse_probabilities("@/nonexistent.json", "--p")
                .unwrap_err()
                .contains("cannot read")
        );
    }
}
