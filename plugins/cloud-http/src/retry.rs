//! When a cloud API's answer is worth another attempt, and after how long:
//! 429 (waiting `Retry-After` when it is short enough) and 5xx, and a lost
//! connection when the request may safely run twice; never other 4xx.
//! Bounded: `RETRIES` retries after the first attempt, backing off from
//! `BACKOFF_MS` (400 ms, then 800 ms: the Vercel SDK's policy).

use std::time::Duration;

pub const RETRIES: u32 = 2;
pub const BACKOFF_MS: u64 = 400;
/// A `Retry-After` longer than this is not waited for: the error says when
/// to try again instead.
pub const MAX_RETRY_AFTER_S: u64 = 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Wait this long, then send again.
    Retry(Duration),
    /// Report the error (it is final, or the retries are spent).
    Fail,
}

/// What went wrong with attempt `attempt` (1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server answered this non-2xx status (with its `Retry-After`, s).
    Status {
        status: u16,
        retry_after: Option<u64>,
    },
    /// No answer: connection refused, reset or cut.
    Network { idempotent: bool },
}

pub fn decide(outcome: Outcome, attempt: u32) -> Decision {
    if attempt > RETRIES {
        return Decision::Fail;
    }
    let backoff = Duration::from_millis(BACKOFF_MS << (attempt.saturating_sub(1)));
    match outcome {
        Outcome::Status {
            status: 429,
            retry_after,
        } => match retry_after {
            Some(s) if s > MAX_RETRY_AFTER_S => Decision::Fail,
            Some(s) if s > 0 => Decision::Retry(Duration::from_secs(s)),
            _ => Decision::Retry(backoff),
        },
        Outcome::Status {
            status: 500..=599, ..
        } => Decision::Retry(backoff),
        Outcome::Status { .. } => Decision::Fail,
        Outcome::Network { idempotent: true } => Decision::Retry(backoff),
        Outcome::Network { idempotent: false } => Decision::Fail,
    }
}

/// A `Retry-After` header in seconds (the HTTP-date form is not used by
/// these APIs and counts as absent).
pub fn retry_after(header: Option<&str>) -> Option<u64> {
    header.and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16, retry_after: Option<u64>) -> Outcome {
        Outcome::Status {
            status,
            retry_after,
        }
    }

    #[test]
    fn retries_are_bounded_and_back_off() {
        let ms = Duration::from_millis;
        assert_eq!(decide(status(503, None), 1), Decision::Retry(ms(400)));
        assert_eq!(decide(status(500, None), 2), Decision::Retry(ms(800)));
        assert_eq!(decide(status(500, None), 3), Decision::Fail);
        assert_eq!(
            decide(Outcome::Network { idempotent: true }, 1),
            Decision::Retry(ms(400))
        );
        assert_eq!(
            decide(Outcome::Network { idempotent: false }, 1),
            Decision::Fail
        );
    }

    #[test]
    fn rate_limits_wait_for_retry_after_unless_it_is_long() {
        assert_eq!(
            decide(status(429, Some(2)), 1),
            Decision::Retry(Duration::from_secs(2))
        );
        assert_eq!(
            decide(status(429, None), 1),
            Decision::Retry(Duration::from_millis(400))
        );
        assert_eq!(decide(status(429, Some(600)), 1), Decision::Fail);
        assert_eq!(retry_after(Some(" 3 ")), Some(3));
        assert_eq!(retry_after(Some("Wed, 21 Oct 2015 07:28:00 GMT")), None);
    }

    #[test]
    fn other_client_errors_are_final() {
        for s in [400, 401, 403, 404, 409, 410, 422] {
            assert_eq!(decide(status(s, None), 1), Decision::Fail, "{s}");
        }
    }
}
