//! The one parser of every duration flag (`--quiet-period`, `clean --older-than`,
//! `serve --heartbeat`): a whole number of seconds (`30`, `0`) or a duration in humantime's
//! notation (`30s`, `500ms`, `5m`, `7d`, `1h30m`, `1h 30m`), each flag within its own bounds.
//! (`events --poll-ms` is not one: its name gives its unit, milliseconds.)

use std::ops::RangeInclusive;
use std::time::Duration;

use super::error::{ConfigError, DurationProblem};

/// Parses `text` (spaces at either end ignored): digits alone are seconds; anything else is
/// read by [`humantime::parse_duration`]. The result must lie within `bounds`, both ends
/// included.
///
/// Errors: [`DurationProblem::Unreadable`] for text of neither form (a sign, a fraction, an
/// unknown unit, a number too large), [`DurationProblem::OutOfBounds`] for a duration outside
/// `bounds`.
pub fn parse_duration(
    text: &str,
    bounds: RangeInclusive<Duration>,
) -> Result<Duration, DurationProblem> {
    let text = text.trim();
    let duration = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|e| DurationProblem::Unreadable(e.to_string()))?
    } else {
        humantime::parse_duration(text).map_err(|e| DurationProblem::Unreadable(e.to_string()))?
    };
    if bounds.contains(&duration) {
        Ok(duration)
    } else {
        Err(DurationProblem::OutOfBounds(describe(&bounds)))
    }
}

/// `from 10ms to 1h`, or `at least 10ms` when the upper end is [`Duration::MAX`].
fn describe(bounds: &RangeInclusive<Duration>) -> String {
    let low = written(*bounds.start());
    if *bounds.end() == Duration::MAX {
        format!("at least {low}")
    } else {
        format!("from {low} to {}", written(*bounds.end()))
    }
}

/// A bound as the flags take it: whole days as `365d` (humantime would write months, which
/// the flags read as 30.44 days), anything else in humantime's notation.
fn written(bound: Duration) -> String {
    const DAY: u64 = 24 * 3600;
    let seconds = bound.as_secs();
    if bound.subsec_nanos() == 0 && seconds >= DAY && seconds % DAY == 0 {
        format!("{}d", seconds / DAY)
    } else {
        humantime::format_duration(bound).to_string()
    }
}

/// The bounds of a duration flag that takes any duration, zero included.
pub const ANY_DURATION: RangeInclusive<Duration> = Duration::ZERO..=Duration::MAX;

/// The value of the duration flag `flag`, read by [`parse_duration`] (seconds or a humantime
/// duration) and kept within `bounds`.
///
/// Errors: [`ConfigError::Duration`], naming the flag, the value and the accepted forms.
pub fn duration_flag(
    flag: &'static str,
    text: &str,
    bounds: RangeInclusive<Duration>,
) -> Result<Duration, ConfigError> {
    parse_duration(text, bounds).map_err(|problem| ConfigError::Duration {
        flag,
        value: text.to_string(),
        problem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANY: RangeInclusive<Duration> = Duration::ZERO..=Duration::MAX;

    #[test]
    fn bounds_of_whole_days_are_written_in_days() {
        let year = Duration::from_secs(1)..=Duration::from_secs(365 * 24 * 3600);
        assert_eq!(describe(&year), "from 1s to 365d");
        let hour = Duration::from_millis(10)..=Duration::from_secs(3600);
        assert_eq!(describe(&hour), "from 10ms to 1h");
    }

    #[test]
    fn seconds_and_humantime_forms_are_the_same_durations() {
        for (text, seconds) in [
            ("0", 0),
            ("30", 30),
            (" 604800 ", 604_800),
            ("0s", 0),
            ("30s", 30),
            ("5m", 300),
            ("7d", 604_800),
            ("1h30m", 5_400),
            ("1h 30m", 5_400),
        ] {
            assert_eq!(
                parse_duration(text, ANY),
                Ok(Duration::from_secs(seconds)),
                "{text}"
            );
        }
        assert_eq!(parse_duration("500ms", ANY), Ok(Duration::from_millis(500)));
    }

    #[test]
    fn unreadable_and_out_of_bounds_values_are_refused() {
        for text in ["", "-5", "1.5", "5x", "seven days", "99999999999999999999"] {
            assert!(
                matches!(
                    parse_duration(text, ANY),
                    Err(DurationProblem::Unreadable(_))
                ),
                "{text}"
            );
        }
        let heartbeat = Duration::from_millis(10)..=Duration::from_secs(3600);
        assert_eq!(
            parse_duration("5ms", heartbeat.clone()),
            Err(DurationProblem::OutOfBounds("from 10ms to 1h".into()))
        );
        assert_eq!(
            parse_duration("3601", heartbeat.clone()),
            Err(DurationProblem::OutOfBounds("from 10ms to 1h".into()))
        );
        assert_eq!(
            parse_duration("3600", heartbeat),
            Ok(Duration::from_secs(3600))
        );
        assert_eq!(
            parse_duration("0", Duration::from_secs(1)..=Duration::MAX).map_err(|e| e.to_string()),
            Err("must be at least 1s".into())
        );
    }
}
