//! What Redis memory costs: a price per GiB and month (given, or from a dated preset of a
//! managed offer), the replicas that hold a copy of every byte, and the budget of memory left
//! to leak that `schedule: auto` and the `BullsweepCostLeak` alert measure against.

use crate::duration::Millis;
use crate::schedule::{AUTO_MAX, AUTO_MIN, DEFAULT_SCHEDULE};

/// A managed Redis offer's list price, dated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostPreset {
    /// The name `cost.preset` takes.
    pub name: &'static str,
    /// The offer, region and node type the price is for.
    pub offer: &'static str,
    /// The price of one GiB for a month (730 hours), in US dollars.
    pub per_gb_month: f64,
    /// When the price was taken from the vendor's price list.
    pub as_of: &'static str,
}

/// The presets `cost.preset` may name. Prices change: each says when it was taken, and
/// `cost.perGbMonth` replaces any of them with the price on your bill.
pub const PRESETS: &[CostPreset] = &[
    CostPreset {
        name: "aws-elasticache-r7g",
        offer: "Amazon ElastiCache, node-based, cache.r7g.large (13.07 GiB) at $0.219/hour, us-east-1, on demand; each replica is a node of its own",
        per_gb_month: 0.219 * 730.0 / 13.07,
        as_of: "2024-06",
    },
    CostPreset {
        name: "aws-elasticache-serverless-redis",
        offer: "Amazon ElastiCache Serverless for Redis OSS, data stored at $0.125/GB-hour, us-east-1 (replication included)",
        per_gb_month: 0.125 * 730.0,
        as_of: "2024-06",
    },
    CostPreset {
        name: "aws-elasticache-serverless-valkey",
        offer: "Amazon ElastiCache Serverless for Valkey, data stored at $0.084/GB-hour, us-east-1 (replication included)",
        per_gb_month: 0.084 * 730.0,
        as_of: "2024-10",
    },
];

/// Finds a preset by name.
pub fn preset(name: &str) -> Option<&'static CostPreset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// What memory costs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    /// Price of one GiB of Redis memory for a month (30 days), in any currency, for one copy.
    pub per_gb_month: f64,
    /// How much reclaimable memory may cost per day before `BullsweepCostLeak` fires, and the
    /// leak `schedule: auto` sweeps before; in the same currency.
    pub max_leak: f64,
    /// Replicas holding a copy of every byte (each is billed like the primary).
    pub replicas: u32,
    /// The preset the price comes from, when `cost.preset` names one.
    pub preset: Option<&'static CostPreset>,
}

impl Default for CostModel {
    /// $9.80 per GiB-month (a common managed-Redis price); sweep before one cent leaks.
    fn default() -> Self {
        CostModel {
            per_gb_month: 9.80,
            max_leak: 0.01,
            replicas: 0,
            preset: None,
        }
    }
}

/// Bytes in a GiB.
const GIB: f64 = (1u64 << 30) as f64;

impl CostModel {
    /// What `bytes` of data cost for a month, every copy counted.
    pub fn monthly(&self, bytes: f64) -> f64 {
        bytes / GIB * self.per_gb_month * f64::from(1 + self.replicas)
    }

    /// The interval for `schedule: auto`: the time until reclaimable memory growing at
    /// `growth_bytes_per_day` costs `max_leak`, bounded to 10 minutes … 24 hours. No growth
    /// measured yet (or none at all) gives the default hour.
    pub fn interval(&self, growth_bytes_per_day: f64) -> Millis {
        let daily_cost = self.monthly(growth_bytes_per_day) / 30.0;
        if daily_cost.is_nan() || daily_cost <= 0.0 || daily_cost.is_infinite() {
            return DEFAULT_SCHEDULE;
        }
        let ms = self.max_leak / daily_cost * 86_400_000.0;
        Millis((ms.max(AUTO_MIN.0 as f64).min(AUTO_MAX.0 as f64)) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_interval_is_bounded() {
        let cost = CostModel {
            per_gb_month: 30.0,
            max_leak: 1.0,
            ..CostModel::default()
        };
        // 1 GiB/day at $1/GiB/day: $1 leaks in a day → bounded to 24h.
        assert_eq!(cost.interval(GIB), AUTO_MAX);
        // 24 GiB/day: $1 leaks in an hour.
        assert_eq!(cost.interval(24.0 * GIB), Millis(3_600_000));
        // Huge growth: bounded to 10 minutes.
        assert_eq!(cost.interval(1e15), AUTO_MIN);
        assert_eq!(cost.interval(0.0), DEFAULT_SCHEDULE);
        assert_eq!(cost.interval(f64::NAN), DEFAULT_SCHEDULE);
        // With one replica every byte costs twice: $1 leaks in half an hour.
        let replicated = CostModel {
            replicas: 1,
            ..cost
        };
        assert_eq!(replicated.interval(24.0 * GIB), Millis(1_800_000));
    }

    #[test]
    fn presets_are_named_once_and_priced() {
        for p in PRESETS {
            assert_eq!(preset(p.name), Some(p));
            assert!(p.per_gb_month > 1.0 && p.per_gb_month < 200.0, "{}", p.name);
            assert!(p.as_of.len() == 7, "{} is dated YYYY-MM", p.name);
        }
        assert!((CostModel::default().monthly(GIB) - 9.80).abs() < 1e-9);
    }
}
