//! Orders fire at most once per window.
//!
//! Property (issue 15, "an order fires at most once per window, across leader changes and
//! crashes"): the healed reader lists every order's tracking beads (`order-tracking`, one per
//! firing, its window in `order.window` metadata) and the orders' firing counts. Each order's
//! windows are distinct; a cooldown order's windows (the stamped times of its firings) are at
//! least its interval apart; and no order has more tracking beads than firings.

use std::collections::BTreeMap;

use super::Violation;
use crate::healed::OrderFirings;

/// Checks what the healed reader found of the orders.
pub fn check(found: &Result<OrderFirings, String>) -> Vec<Violation> {
    let violation = |detail: String| Violation { checker: "orders", detail };
    let found = match found {
        Ok(found) => found,
        Err(error) => return vec![violation(format!("the orders could not be read back: {error}"))],
    };
    let mut violations = Vec::new();
    let mut windows: BTreeMap<&str, Vec<(u64, &str)>> = BTreeMap::new();
    for (order, window, bead) in &found.tracking {
        windows.entry(order.as_str()).or_default().push((*window, bead.as_str()));
    }
    for (order, mut fired) in windows {
        fired.sort();
        for pair in fired.windows(2) {
            let ((first, first_bead), (second, second_bead)) = (pair[0], pair[1]);
            if first == second {
                violations.push(violation(format!(
                    "order {order} fired twice in window {first}: tracking beads {first_bead} and {second_bead}"
                )));
            } else if let Some(interval_ms) = found.cooldown_ms.get(order)
                && second - first < *interval_ms
            {
                violations.push(violation(format!(
                    "cooldown order {order} fired {} ms apart (at {first} and {second}, beads {first_bead} and {second_bead}); its interval is {interval_ms} ms",
                    second - first
                )));
            }
        }
        let counted = found.fired.get(order).copied().unwrap_or(0);
        if fired.len() as u64 > counted {
            violations.push(violation(format!(
                "order {order} has {} tracking beads but counts {counted} firings",
                fired.len()
            )));
        }
    }
    violations
}
