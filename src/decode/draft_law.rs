//! A drafted token's law: built when the token was drawn, or only when
//! something reads it.
//!
//! A walk reads the draft law of the rows still valid at each depth it
//! reaches, at most one distinct law per depth; every other draft law only
//! fed the draw of its token. Those are drawn without being built
//! ([`Processing::draw`]) and keep their draft call's logits, so the few
//! the walk does read are built then, from the same logits: the same law,
//! bit for bit, as one built when the token was drawn.

use std::cell::OnceCell;
use std::rc::Rc;

use anyhow::Result;

use super::round::process;
use crate::laws::{Dist, Processing};
use crate::model::Logits;

pub(crate) enum DraftLaw {
    /// Built when its token was drawn.
    Built(Rc<Dist>),
    /// Built on first read from row `row` of a draft call's logits.
    Deferred {
        logits: Rc<Logits>,
        row: usize,
        processing: Processing,
        law: OnceCell<Rc<Dist>>,
    },
}

impl DraftLaw {
    pub fn deferred(logits: Rc<Logits>, row: usize, processing: Processing) -> Self {
        Self::Deferred {
            logits,
            row,
            processing,
            law: OnceCell::new(),
        }
    }

    /// What a law not built yet is built from: its processing and logits
    /// row (fetched now). `None` once built.
    pub fn unbuilt(&self) -> Result<Option<(&Processing, &[f32])>> {
        match self {
            Self::Deferred {
                logits,
                row,
                processing,
                law,
            } if law.get().is_none() => Ok(Some((processing, logits.at(*row, 0)?))),
            _ => Ok(None),
        }
    }

    /// Keeps `built`, the law [`DraftLaw::unbuilt`]'s inputs give, built
    /// elsewhere (a law already built stays as it was).
    pub fn keep(&self, built: Dist) {
        if let Self::Deferred { law, .. } = self {
            let _ = law.get_or_init(|| Rc::new(built));
        }
    }

    /// The law, built now if it was not yet.
    pub fn get(&self) -> Result<&Rc<Dist>> {
        match self {
            Self::Built(law) => Ok(law),
            Self::Deferred {
                logits,
                row,
                processing,
                law,
            } => {
                if let Some(built) = law.get() {
                    return Ok(built);
                }
                let built = process(processing, logits.at(*row, 0)?, "draft")?;
                Ok(law.get_or_init(|| Rc::new(built)))
            }
        }
    }
}
