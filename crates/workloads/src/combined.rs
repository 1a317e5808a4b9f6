//! Several workloads on one device at once, as the MODA paper's "Camera + Phone" (a phone
//! with a camera) and "Movie + Recorder + Postmark" (a media player keeping a database of
//! titles and rights), sec. 6.3.3.
//!
//! Interleaved, not one after another: the paper finds that "the interferences among
//! benchmarks drive uniformity of Flash memory low, even for large sequential multimedia
//! files", which parts run one after another would not show (each would lay its pages
//! out as it does alone). Each step picks a part at random (seeded), with a probability
//! in proportion to the steps that part still has to do, so every part is spread evenly
//! over the whole run rather than the short ones finishing first. A part's step is its
//! own unit (a camera transaction, a phone event, a 32 KiB movie write, a PostMark
//! transaction), so a movie being copied interleaves with database updates request by
//! request.
//!
//! Capacity: each part is built for an equal share of the device (`device_bytes / n`),
//! so its volumes (Movie's fill, Camera's kept photos, Phone's logs) are those of the part
//! alone on a device of that size, and the parts together never ask for more than the
//! device. Given the whole device each, Movie would fill it and leave the others nothing;
//! the paper does not say how it sized the parts.
//!
//! Each part works in its own directory, `/name` (`/name-2`, `/name-3`, ... for a
//! workload named twice), with its own seed drawn from the combination's.

use std::sync::Mutex;

use rand::distributions::{Distribution, WeightedIndex};
use rand::RngCore;

use crate::common::{rng, Counted, Rng, Stepper};
use crate::TargetError;

pub struct Combined {
    name: &'static str,
    rng: Rng,
    /// Parts not finished yet.
    parts: Vec<Box<dyn Stepper>>,
}

/// A combination's name as a `&'static str`: each distinct one is allocated once and
/// kept, so building the same combination again leaks nothing more.
fn intern(name: String) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&n) = names.iter().find(|&&n| n == name) {
        return n;
    }
    let n: &'static str = Box::leak(name.into_boxed_str());
    names.push(n);
    n
}

impl Combined {
    pub fn new(names: &[&str], seed: u64, device_bytes: u64) -> Option<Self> {
        if names.is_empty() {
            return None;
        }
        let mut rng = rng(seed);
        let share = device_bytes / names.len() as u64;
        let mut parts = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            let earlier = names[..i].iter().filter(|n| *n == name).count();
            let dir = match earlier {
                0 => format!("/{name}"),
                k => format!("/{name}-{}", k + 1),
            };
            parts.push(crate::stepper(name, rng.next_u64(), share, &dir)?);
        }
        Some(Self {
            name: intern(names.join("+")),
            rng,
            parts,
        })
    }
}

impl Stepper for Combined {
    fn name(&self) -> &'static str {
        self.name
    }

    fn source(&self) -> &'static str {
        "MODA paper sec. 6.3.3 (combinations, interference); parts interleaved at random, \
         each on an equal share of the capacity (our choice)"
    }

    /// One step of one part.
    fn step(&mut self, t: &mut Counted<'_>) -> Result<bool, TargetError> {
        while !self.parts.is_empty() {
            // A part's estimate may reach 0 before it is done: it still gets a chance.
            let weights = self.parts.iter().map(|p| p.steps_left().max(1));
            let pick = WeightedIndex::new(weights).expect("positive weights");
            let i = pick.sample(&mut self.rng);
            if self.parts[i].step(t)? {
                return Ok(true);
            }
            self.parts.remove(i);
        }
        Ok(false)
    }

    fn steps_left(&self) -> u64 {
        self.parts.iter().map(|p| p.steps_left()).sum()
    }
}
