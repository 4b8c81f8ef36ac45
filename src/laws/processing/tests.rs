//! Processing against its definitions: softmax, top-k, top-p by sorting,
//! and the certified path bit for bit against the full one.

use super::*;
#[test]
fn temperature_and_softmax_match_the_closed_form() {
    let proc = Processing {
        temperature: 2.0,
        ..Processing::default()
    };
    let d = proc.apply(&[0.0f64, 2.0f64.ln() * 2.0]).unwrap();
    assert!((d.get(0) - 1.0 / 3.0).abs() < 1e-15);
    assert!((d.get(1) - 2.0 / 3.0).abs() < 1e-15);
}

#[test]
fn top_p_keeps_the_shortest_prefix_reaching_the_mass_with_ties_by_id() {
    // probabilities 0.4, 0.2, 0.2, 0.1, 0.1 at ids 3, 0, 4, 1, 2
    let probs = [0.2f64, 0.1, 0.1, 0.4, 0.2];
    let logits: Vec<f64> = probs.iter().map(|p| p.ln()).collect();
    let proc = Processing {
        top_p: 0.75,
        ..Processing::default()
    };
    let d = proc.apply(&logits).unwrap();
    // 0.4 (id 3) + 0.2 (id 0, smaller id of the tie) = 0.6 < 0.75, + 0.2 (id 4) = 0.8.
    assert_eq!(d.support(), &[0, 3, 4]);
    assert_eq!(d.get(1), 0.0);
    assert!((d.get(3) - 0.5).abs() < 1e-15);
    let crossing = Processing {
        top_p: 0.6,
        ..Processing::default()
    }
    .apply(&logits)
    .unwrap();
    assert_eq!(crossing.support(), &[0, 3]);
}

#[test]
fn top_p_on_a_large_vocabulary_agrees_with_a_full_sort() {
    let v = 5000;
    let logits: Vec<f64> = (0..v)
        .map(|i| -((i * 7919 % v) as f64 + 1.0).ln() * 1.3)
        .collect();
    let d = Processing {
        top_p: 0.95,
        ..Processing::default()
    }
    .apply(&logits)
    .unwrap();
    let full = softmax(&logits, 1.0).unwrap();
    let mut order: Vec<u32> = (0..v as u32).collect();
    order.sort_by(by_prob_desc(&full));
    let mut mass = 0.0;
    let mut n = 0;
    while mass < 0.95 {
        mass += full[order[n] as usize];
        n += 1;
    }
    let mut expect: Vec<u32> = order[..n].to_vec();
    expect.sort();
    assert_eq!(d.support(), expect.as_slice());
    assert!(n > 64, "the test must exercise the deepening loop ({n})");
}

#[test]
fn top_p_with_many_ties_cuts_by_id_across_chunk_boundaries() {
    // 3000 tokens on 6 probability levels: the crossing falls inside a
    // tie run far past the first chunk, so ids decide who is kept.
    let v = 3000u32;
    let logits: Vec<f64> = (0..v).map(|i| -f64::from((i * 37) % 6)).collect();
    let full = softmax(&logits, 1.0).unwrap();
    for top_p in [0.3, 0.5, 0.77, 0.95] {
        let d = Processing {
            top_p,
            ..Processing::default()
        }
        .apply(&logits)
        .unwrap();
        let mut order: Vec<u32> = (0..v).collect();
        order.sort_by(by_prob_desc(&full));
        let (mut mass, mut n) = (0.0, 0);
        while mass < top_p {
            mass += full[order[n] as usize];
            n += 1;
        }
        let mut expect = order[..n].to_vec();
        expect.sort();
        assert_eq!(d.support(), expect.as_slice(), "top_p {top_p}");
    }
}

#[test]
fn top_k_then_top_p_are_applied_in_that_order() {
    let logits: Vec<f64> = [0.5f64, 0.3, 0.15, 0.05].iter().map(|p| p.ln()).collect();
    let d = Processing {
        top_k: Some(2),
        top_p: 0.6,
        ..Processing::default()
    }
    .apply(&logits)
    .unwrap();
    // top-2 renormalised: 0.625, 0.375; top-p 0.6 then keeps id 0 only.
    assert_eq!(d.support(), &[0]);
    assert_eq!(d.get(0), 1.0);
}

/// Laws of every shape the certified path meets: the synthetic
/// family's (a head, boosted tokens, a thin tail), flat ones, many-way
/// ties, and a cut placed exactly on a boundary.
fn laws(v: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = crate::rng::SpecRng::derive(seed, &[v as u64]);
    let mut out = Vec::new();
    for shape in 0..6 {
        let logits: Vec<f32> = (0..v)
            .map(|i| match shape {
                0 => -(((i * 7919) % v) as f32 + 1.0).ln() * 1.4 - 30.0 * (i as f32 / v as f32),
                1 => (rng.uniform() * 8.0) as f32,
                2 => -(((i * 37) % 6) as f32),
                3 => (rng.uniform() * 3.0).floor() as f32 * 0.5,
                4 => -(rng.uniform().powi(3) * 40.0) as f32,
                _ => (rng.uniform() - 0.5) as f32 * 1e-3,
            })
            .collect();
        out.push(logits);
    }
    out
}

fn assert_same(a: &Dist, b: &Dist, what: &str) {
    assert_eq!(a.support(), b.support(), "{what}: supports differ");
    let bits = |d: &Dist| {
        d.support_probs()
            .iter()
            .map(|p| p.to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(a), bits(b), "{what}: probabilities differ");
    assert_eq!(
        a.mass().to_bits(),
        b.mass().to_bits(),
        "{what}: masses differ"
    );
}

/// One law of the grid: where it comes from (for messages), its logits,
/// processing and largest logit, and the full path's law.
struct GridLaw<'a> {
    what: String,
    v: usize,
    logits: &'a [f32],
    proc: Processing,
    max: f64,
    full: Dist,
}

/// `check` on every law of `laws(v, seed)` for each size and seed, at
/// each temperature and top-p.
fn for_each_law(
    sizes: &[(usize, u64)],
    temperatures: &[f64],
    top_ps: &[f64],
    mut check: impl FnMut(GridLaw),
) {
    for &(v, seed) in sizes {
        for (shape, logits) in laws(v, seed).iter().enumerate() {
            for &temperature in temperatures {
                for &top_p in top_ps {
                    let proc = Processing {
                        temperature,
                        top_k: None,
                        top_p,
                    };
                    let max = max_logit(logits).unwrap();
                    check(GridLaw {
                        what: format!("V {v} shape {shape} T {temperature} p {top_p}"),
                        v,
                        logits,
                        proc,
                        max,
                        full: proc.full(logits, max),
                    });
                }
            }
        }
    }
}

#[test]
fn the_certified_law_is_the_full_law_bit_for_bit_or_none() {
    let mut certified_count = 0;
    let mut total = 0;
    let sizes = [(50_272, 1), (5_003, 2), (257, 3), (31, 4)];
    for_each_law(
        &sizes,
        &[0.6, 1.0, 1.2, 2.4],
        &[0.3, 0.9, 0.95, 0.999],
        |law| {
            let GridLaw {
                what,
                logits,
                proc,
                max,
                full,
                ..
            } = law;
            total += 1;
            if let Some(law) = certified::top_p(logits, max, proc.temperature, proc.top_p) {
                certified_count += 1;
                assert_same(&law, &full, &what);
            }
            assert_same(&proc.apply(logits).unwrap(), &full, "apply");
        },
    );
    // The test must exercise the certified path, not only the fallback.
    assert!(
        certified_count * 2 > total,
        "{certified_count} of {total} certified"
    );
}

/// Uniforms for draws: a grid, both ends, and each side of a spread of
/// the law's own cumulative boundaries, where only rounding decides.
fn uniforms_around(law: &Dist) -> Vec<f64> {
    let mut us: Vec<f64> = (0..16).map(|i| (f64::from(i) + 0.5) / 16.0).collect();
    us.extend([0.0, 1.0 - f64::EPSILON / 2.0]);
    let probs = law.support_probs();
    let step = (probs.len() / 12).max(1);
    let mut running = 0.0;
    for (j, &q) in probs.iter().enumerate() {
        running += q;
        if j % step == 0 && j + 1 < probs.len() {
            let b = running / law.mass();
            us.extend([b, b.next_up(), b.next_down()]);
        }
    }
    us
}

#[test]
fn draws_are_the_full_laws_draws_or_build_it() {
    // (draws, draws certified without the law) at V = 50,272, T ≥ 2,
    // off the boundaries.
    let (mut hot, mut hot_drawn) = (0, 0);
    let sizes = [(50_272, 11), (5_003, 12)];
    for_each_law(&sizes, &[1.0, 2.4, 4.0], &[0.9, 0.95, 0.999], |law| {
        let GridLaw {
            what,
            v,
            logits,
            proc,
            max,
            full,
        } = law;
        let us = uniforms_around(&full);
        for (i, &u) in us.iter().enumerate() {
            let (temperature, top_p) = (proc.temperature, proc.top_p);
            let drawn = certified::top_p_draws(logits, max, temperature, top_p, &[u]);
            // The grid's draws (the others sit on boundaries).
            if v == 50_272 && temperature >= 2.0 && i < 16 {
                hot += 1;
                hot_drawn += usize::from(matches!(drawn, Drawn::Tokens(_)));
            }
            match drawn {
                Drawn::Tokens(t) => assert_eq!(t, [full.sample(u)], "{what} u {u}"),
                Drawn::Law(law) => assert_same(&law, &full, &what),
                Drawn::Full => {}
            }
        }
        // All at once, through `draw`, as the walk draws.
        let (tokens, law) = proc.draw(logits, &us).unwrap();
        let expected: Vec<u32> = us.iter().map(|&u| full.sample(u)).collect();
        assert_eq!(tokens, expected, "{what}");
        if let Some(law) = law {
            assert_same(&law, &full, &what);
        }
    });
    // The draws must be certified most of the time where they are
    // meant to be (hot laws, large nuclei), not only left to the law.
    eprintln!("{hot_drawn} of {hot} hot draws certified");
    assert!(
        hot_drawn * 2 > hot,
        "{hot_drawn} of {hot} hot draws certified"
    );
}

#[test]
fn minus_infinity_logits_and_f64_logits_give_the_full_law() {
    let mut logits = laws(5_003, 9).swap_remove(0);
    for i in (0..logits.len()).step_by(7) {
        logits[i] = f32::NEG_INFINITY;
    }
    let proc = Processing {
        temperature: 1.2,
        top_k: None,
        top_p: 0.95,
    };
    let full = proc.full(&logits, max_logit(&logits).unwrap());
    let law = certified::top_p(&logits, max_logit(&logits).unwrap(), 1.2, 0.95);
    assert_same(&law.expect("-inf logits are certified"), &full, "-inf");
    // f64 logits always take the full path.
    let wide: Vec<f64> = logits.iter().map(|&l| f64::from(l)).collect();
    assert!(certified::top_p(&wide, max_logit(&wide).unwrap(), 1.2, 0.95).is_none());
    assert_same(&proc.apply(&wide).unwrap(), &full, "f64 logits");
}

#[test]
fn a_cut_exactly_on_a_tie_is_left_to_the_full_path_or_agrees() {
    // 100 equal tokens and top-p = k/100: the exact cut lands on a
    // token boundary, where only rounding decides; whatever the
    // certified path returns must be the full path's law.
    let logits = vec![0.0f32; 100];
    for k in [1, 10, 50, 95, 99] {
        let top_p = k as f64 / 100.0;
        let proc = Processing {
            top_p,
            ..Processing::default()
        };
        let full = proc.full(&logits, 0.0);
        if let Some(law) = certified::top_p(&logits, 0.0, 1.0, top_p) {
            assert_same(&law, &full, &format!("top-p {top_p}"));
        }
        assert_same(&proc.apply(&logits).unwrap(), &full, "apply");
    }
}

#[test]
fn processing_rejects_bad_settings_and_logits() {
    let bad = |p: Processing| p.apply(&[0.0f64, 1.0]).is_err();
    assert!(bad(Processing {
        temperature: 0.0,
        ..Processing::default()
    }));
    assert!(bad(Processing {
        top_p: 0.0,
        ..Processing::default()
    }));
    assert!(bad(Processing {
        top_k: Some(0),
        ..Processing::default()
    }));
    assert!(Processing::default().apply(&[f64::NAN, 0.0]).is_err());
}
