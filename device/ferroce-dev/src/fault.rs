// SPDX-License-Identifier: GPL-2.0
//! Fault injection on the RDMA engine's egress frames.
//!
//! Faults apply to every RoCE frame the engine sends (wire and loopback),
//! never to the frames it receives (the peer's own faults cover that
//! direction), deterministically from a seed: drop, duplicate, reorder (hold
//! a frame back until a later one has gone), corrupt (flip a payload bit,
//! so the ICRC no longer matches) and delay (hold a frame for a fixed time).
//! Rates are in parts per million. A stalled device processes nothing (no
//! doorbells beyond recording them, no frames, no timers) until unstalled.
//!
//! Set from the command line (`--fault drop=1%,dup=0.5%,seed=7`) or the
//! control socket (`{"cmd":"fault","spec":"drop=1%"}`, `{"cmd":"stall","on":true}`).

use serde::{Deserialize, Serialize};

/// Rates of each fault, in parts per million of frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultConfig {
    /// Frames dropped.
    pub drop_ppm: u32,
    /// Frames sent twice.
    pub dup_ppm: u32,
    /// Frames held back behind the next frame.
    pub reorder_ppm: u32,
    /// Frames with one bit flipped after the headers (bad ICRC).
    pub corrupt_ppm: u32,
    /// Frames delayed by `delay_ns`.
    pub delay_ppm: u32,
    /// Delay of delayed frames.
    pub delay_ns: u64,
    /// Seed of the fault generator.
    pub seed: u64,
}

/// What was injected so far.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct FaultCounters {
    /// Frames seen by the injector.
    pub frames: u64,
    /// Dropped.
    pub dropped: u64,
    /// Duplicated.
    pub duplicated: u64,
    /// Reordered.
    pub reordered: u64,
    /// Corrupted.
    pub corrupted: u64,
    /// Delayed.
    pub delayed: u64,
}

fn parse_rate(v: &str) -> Option<u32> {
    let (num, scale) = match v.strip_suffix('%') {
        Some(n) => (n, 10_000.0),
        None => match v.strip_suffix("ppm") {
            Some(n) => (n, 1.0),
            None => (v, 1_000_000.0), // a fraction 0..1
        },
    };
    let f: f64 = num.trim().parse().ok()?;
    let ppm = f * scale;
    (0.0..=1_000_000.0).contains(&ppm).then_some(ppm as u32)
}

fn parse_duration_ns(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, mul) = if let Some(n) = v.strip_suffix("ns") {
        (n, 1)
    } else if let Some(n) = v.strip_suffix("us") {
        (n, 1_000)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1_000_000)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1_000_000_000)
    } else {
        (v, 1_000)
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

impl FaultConfig {
    /// Parses `drop=1%,dup=0.1%,reorder=2%,corrupt=500ppm,delay=5%:200us,seed=3`
    /// (rates as percent, ppm or a fraction; `none` or empty clears).
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut c = Self::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "none" {
                continue;
            }
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("fault {item}: expected key=value"))?;
            let rate = || parse_rate(v).ok_or_else(|| format!("fault {k}: bad rate {v}"));
            match k {
                "drop" => c.drop_ppm = rate()?,
                "dup" => c.dup_ppm = rate()?,
                "reorder" => c.reorder_ppm = rate()?,
                "corrupt" => c.corrupt_ppm = rate()?,
                "delay" => {
                    let (r, d) = v.split_once(':').ok_or("fault delay: expected RATE:TIME")?;
                    c.delay_ppm =
                        parse_rate(r).ok_or_else(|| format!("fault delay: bad rate {r}"))?;
                    c.delay_ns =
                        parse_duration_ns(d).ok_or_else(|| format!("fault delay: bad time {d}"))?;
                }
                "seed" => c.seed = v.parse().map_err(|_| format!("fault seed: bad {v}"))?,
                _ => return Err(format!("unknown fault {k}")),
            }
        }
        Ok(c)
    }

    /// Whether any fault is enabled.
    pub fn active(&self) -> bool {
        self.drop_ppm | self.dup_ppm | self.reorder_ppm | self.corrupt_ppm | self.delay_ppm != 0
    }
}

/// What to do with one frame.
#[derive(Debug, Default)]
pub(crate) struct FaultState {
    pub cfg: FaultConfig,
    pub counters: FaultCounters,
    rng: u64,
    /// A frame held back for reordering.
    pub held: Option<Vec<u8>>,
    /// Delayed frames: (release time, frame).
    pub delayed: Vec<(u64, Vec<u8>)>,
    pub stalled: bool,
}

impl FaultState {
    pub fn set(&mut self, cfg: FaultConfig) {
        self.cfg = cfg;
        self.rng = cfg.seed ^ 0x9e37_79b9_7f4a_7c15;
    }

    fn next(&mut self) -> u64 {
        // splitmix64
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn hit(&mut self, ppm: u32) -> bool {
        ppm != 0 && (self.next() % 1_000_000) < u64::from(ppm)
    }

    /// Applies the faults to `frame` at time `now`; returns the frames to
    /// deliver now (0, 1 or 2 plus a released reordered one).
    pub fn apply(&mut self, frame: Vec<u8>, now: u64) -> Vec<Vec<u8>> {
        let c = self.cfg;
        if !c.active() && self.held.is_none() {
            return vec![frame];
        }
        self.counters.frames += 1;
        if self.hit(c.drop_ppm) {
            self.counters.dropped += 1;
            return Vec::new();
        }
        let mut frame = frame;
        if self.hit(c.corrupt_ppm) && frame.len() > 60 {
            // After Ethernet + IPv6 + UDP + BTH: payload or ICRC bytes.
            let span = (frame.len() - 60) as u64;
            let i = 60 + (self.next() % span) as usize;
            let bit = (self.next() % 8) as u8;
            if let Some(b) = frame.get_mut(i) {
                *b ^= 1 << bit;
            }
            self.counters.corrupted += 1;
        }
        if self.hit(c.delay_ppm) {
            self.counters.delayed += 1;
            self.delayed.push((now.saturating_add(c.delay_ns), frame));
            return Vec::new();
        }
        let mut out = Vec::new();
        if self.hit(c.dup_ppm) {
            self.counters.duplicated += 1;
            out.push(frame.clone());
        }
        if self.held.is_none() && self.hit(c.reorder_ppm) {
            self.counters.reordered += 1;
            self.held = Some(frame);
            return out;
        }
        out.push(frame);
        if let Some(h) = self.held.take() {
            out.push(h);
        }
        out
    }

    /// Delayed frames due at `now`, and a held frame if nothing followed it.
    pub fn release(&mut self, now: u64, flush_held: bool) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.delayed.len() {
            if self.delayed[i].0 <= now {
                out.push(self.delayed.swap_remove(i).1);
            } else {
                i += 1;
            }
        }
        if flush_held {
            out.extend(self.held.take());
        }
        out
    }

    /// Earliest delayed release.
    pub fn next_release(&self) -> Option<u64> {
        self.delayed.iter().map(|d| d.0).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_specs() {
        let c =
            FaultConfig::parse("drop=1%,dup=500ppm,reorder=0.02,corrupt=0%,delay=5%:200us,seed=9")
                .unwrap();
        assert_eq!(c.drop_ppm, 10_000);
        assert_eq!(c.dup_ppm, 500);
        assert_eq!(c.reorder_ppm, 20_000);
        assert_eq!(c.delay_ppm, 50_000);
        assert_eq!(c.delay_ns, 200_000);
        assert_eq!(c.seed, 9);
        assert!(FaultConfig::parse("drop=200%").is_err());
        assert!(FaultConfig::parse("bogus=1").is_err());
        assert_eq!(FaultConfig::parse("none").unwrap(), FaultConfig::default());
    }

    #[test]
    fn drop_everything_and_count() {
        let mut f = FaultState::default();
        f.set(FaultConfig::parse("drop=100%").unwrap());
        for _ in 0..10 {
            assert!(f.apply(vec![0; 100], 0).is_empty());
        }
        assert_eq!(f.counters.dropped, 10);
    }

    #[test]
    fn reorder_swaps_neighbours() {
        let mut f = FaultState::default();
        f.set(FaultConfig::parse("reorder=100%").unwrap());
        assert!(f.apply(vec![1; 64], 0).is_empty());
        assert_eq!(f.apply(vec![2; 64], 0), vec![vec![2; 64], vec![1; 64]]);
    }

    #[test]
    fn delay_releases_later() {
        let mut f = FaultState::default();
        f.set(FaultConfig::parse("delay=100%:1ms").unwrap());
        assert!(f.apply(vec![1; 64], 0).is_empty());
        assert!(f.release(999_999, false).is_empty());
        assert_eq!(f.release(1_000_000, false), vec![vec![1; 64]]);
    }
}
