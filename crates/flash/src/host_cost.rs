//! The host software's own cost, in simulated time: what the CPU spends around the flash
//! operations. The MA paper names it as the reason its gains stay below P ("the software
//! stack latency is constant for all three flash types"; thread management; the TNC lock),
//! so a model of MA that leaves it out can only reach the ideal speed-up.
//!
//! The host is one serial resource (the file system runs its requests under one lock), so
//! every cost below moves the caller's clock before the operations it precedes are issued;
//! the chips still overlap each other. All parameters are 0 by default: flash time only.

use serde::Serialize;

/// Named host costs, nanoseconds each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HostCost {
    /// Per request from the application (a write, a read, an fsync of O_SYNC...): system
    /// call, VFS, the file system's lookup and lock. Charged by whoever issues requests
    /// ([`crate::FlashDevice::charge_request`]).
    pub request_ns: u64,
    /// Per sub-request the dispatcher hands to a chip's worker (queueing and waking a
    /// thread). Only on an array: one chip has no dispatcher.
    pub handoff_ns: u64,
    /// Per page the file system reads or programs (copying, CRCs, index updates).
    pub page_ns: u64,
    /// Per chip's worker thread started at mount ([`crate::FlashDevice::charge_mount`]).
    /// Only on an array.
    pub device_ns: u64,
}

impl HostCost {
    pub const ZERO: HostCost = HostCost {
        request_ns: 0,
        handoff_ns: 0,
        page_ns: 0,
        device_ns: 0,
    };

    pub fn is_zero(&self) -> bool {
        *self == Self::ZERO
    }

    /// Every parameter times `k` (a sweep).
    pub fn scaled(&self, k: f64) -> HostCost {
        let s = |x: u64| (x as f64 * k).round() as u64;
        HostCost {
            request_ns: s(self.request_ns),
            handoff_ns: s(self.handoff_ns),
            page_ns: s(self.page_ns),
            device_ns: s(self.device_ns),
        }
    }

    /// Parses `0`, or `request=US,handoff=US,page=US,device=US` (microseconds, any subset;
    /// the rest 0).
    pub fn parse(text: &str) -> Result<HostCost, String> {
        let mut c = HostCost::ZERO;
        if text.trim() == "0" {
            return Ok(c);
        }
        for part in text.split(',') {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?}: give NAME=MICROSECONDS"))?;
            let us: f64 = value
                .trim()
                .parse()
                .map_err(|_| format!("{value:?} is not a number of microseconds"))?;
            if !(0.0..=1e9).contains(&us) {
                return Err(format!("{name}={us}: out of range"));
            }
            let ns = (us * 1e3).round() as u64;
            match name.trim() {
                "request" => c.request_ns = ns,
                "handoff" => c.handoff_ns = ns,
                "page" => c.page_ns = ns,
                "device" => c.device_ns = ns,
                other => {
                    return Err(format!(
                        "unknown cost {other:?} (known: request, handoff, page, device)"
                    ))
                }
            }
        }
        Ok(c)
    }
}

impl std::fmt::Display for HostCost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let us = |ns: u64| ns as f64 / 1e3;
        write!(
            f,
            "request={},handoff={},page={},device={}",
            us(self.request_ns),
            us(self.handoff_ns),
            us(self.page_ns),
            us(self.device_ns)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_prints() {
        let c = HostCost::parse("request=12.5,page=0.75,handoff=3,device=250").unwrap();
        assert_eq!(c.request_ns, 12_500);
        assert_eq!(c.page_ns, 750);
        assert_eq!(HostCost::parse(&c.to_string()).unwrap(), c);
        assert_eq!(HostCost::parse("0").unwrap(), HostCost::ZERO);
        assert!(HostCost::parse("cpu=3").is_err());
        assert!(HostCost::parse("page").is_err());
        assert_eq!(c.scaled(2.0).page_ns, 1_500);
    }
}
