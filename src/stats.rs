//! Small statistics helpers.

use std::time::Duration;

/// The median of `samples` (the mean of the middle two for an even count).
pub fn median(samples: &[Duration]) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    let mut v = samples.to_vec();
    v.sort_unstable();
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 { v[mid] } else { (v[mid - 1] + v[mid]) / 2 })
}

/// Formats a duration in µs with one decimal.
pub fn micros(d: Option<Duration>) -> String {
    d.map_or_else(|| "n/a".into(), |d| format!("{:.1} µs", d.as_secs_f64() * 1e6))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        let us = Duration::from_micros;
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[us(5), us(1), us(3)]), Some(us(3)));
        assert_eq!(median(&[us(4), us(1), us(3), us(2)]), Some(Duration::from_nanos(2500)));
        assert_eq!(micros(Some(us(7))), "7.0 µs");
    }
}
