//! Per-host request rates (`[network.rate_limits]`), counted by the store's exact limiter: the
//! same counters as policy's rate limits, so they hold across processes sharing the data
//! directory and across restarts. A host matching a wildcard counts toward the pattern's one
//! counter. A count that cannot be kept refuses the request (fail closed).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tw_core::policy::RuleRef;
use tw_core::policy::rate::{RateCheck, RateOutcome, RateWindow};
use tw_core::target::{EgressRefusal, Host};
use tw_store::Store;

use super::HostLimiter;
use crate::clock::Clock;

/// `[network.rate_limits]`: one host pattern's limits.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRate {
    /// The hosts it counts (all of them together, for a wildcard).
    pub hosts: tw_core::target::DomainPattern,
    /// Requests per minute, if limited.
    pub per_minute: Option<u32>,
    /// Requests per hour, if limited.
    pub per_hour: Option<u32>,
}

const MINUTE_US: i64 = 60_000_000;

/// The limiter over the store.
pub struct StoreLimiter {
    store: Store,
    clock: Arc<dyn Clock>,
    rates: Vec<HostRate>,
}

impl StoreLimiter {
    /// Counts in `store` by `clock`'s time; `None` when there are no limits.
    pub fn new(store: Store, clock: Arc<dyn Clock>, rates: Vec<HostRate>) -> Option<Self> {
        (!rates.is_empty()).then_some(StoreLimiter {
            store,
            clock,
            rates,
        })
    }
}

impl HostLimiter for StoreLimiter {
    fn admit<'a>(
        &'a self,
        host: &'a Host,
    ) -> Pin<Box<dyn Future<Output = Result<(), EgressRefusal>> + Send + 'a>> {
        Box::pin(async move {
            let checks: Vec<RateCheck> = self
                .rates
                .iter()
                .filter(|r| r.hosts.matches(host))
                .map(|r| RateCheck {
                    key: format!("network:{}", r.hosts.as_str()),
                    windows: [(r.per_minute, MINUTE_US), (r.per_hour, 60 * MINUTE_US)]
                        .into_iter()
                        .filter_map(|(limit, window_us)| {
                            limit.map(|limit| RateWindow { window_us, limit })
                        })
                        .collect(),
                    rule: RuleRef::new(r.hosts.as_str(), "config network.rate_limits"),
                })
                .collect();
            if checks.is_empty() {
                return Ok(());
            }
            let refuse = |rule: &str, reason: String| EgressRefusal {
                rule: format!("network rate_limits {rule:?}"),
                reason,
                address: None,
            };
            match self.store.rate_acquire(&checks, self.clock.now_us()).await {
                Ok(RateOutcome::Admitted) => Ok(()),
                Ok(RateOutcome::Limited {
                    key,
                    window_us,
                    limit,
                    retry_after_us,
                    ..
                }) => {
                    let pattern = key.trim_start_matches("network:");
                    let per = if window_us == MINUTE_US {
                        "minute"
                    } else {
                        "hour"
                    };
                    Err(refuse(
                        pattern,
                        format!(
                            "{host} reached its limit of {limit} requests per {per}; retry in \
                             {} s",
                            ((retry_after_us.max(0) + 999_999) / 1_000_000).max(1)
                        ),
                    ))
                }
                Err(e) => Err(refuse(
                    "*",
                    format!("requests to {host} could not be counted, so none is made: {e}"),
                )),
            }
        })
    }
}
