//! Version ranges generated for the property tests of both range syntaxes: groups of
//! comparisons, and what each group says of a candidate.

use std::{cmp::Ordering, fmt::Display};

use proptest::prelude::*;

/// A comparison operator as range text writes it, and what it says of `candidate.cmp(bound)`.
pub type Operator = (&'static str, fn(Ordering) -> bool);

/// One of `=`, `!=`, `>`, `<`, `>=`, `<=`.
pub fn operator() -> impl Strategy<Value = Operator> {
    prop_oneof![
        Just(("=", Ordering::is_eq as fn(Ordering) -> bool)),
        Just(("!=", Ordering::is_ne as fn(Ordering) -> bool)),
        Just((">", Ordering::is_gt as fn(Ordering) -> bool)),
        Just(("<", Ordering::is_lt as fn(Ordering) -> bool)),
        Just((">=", Ordering::is_ge as fn(Ordering) -> bool)),
        Just(("<=", Ordering::is_le as fn(Ordering) -> bool)),
    ]
}

/// The range text of `groups`: comparisons within a group joined by `and`, groups by ` || `.
pub fn range_text<V: Display>(groups: &[Vec<(Operator, V)>], and: &str) -> String {
    groups
        .iter()
        .map(|group| {
            group
                .iter()
                .map(|((op, _), bound)| format!("{op}{bound}"))
                .collect::<Vec<_>>()
                .join(and)
        })
        .collect::<Vec<_>>()
        .join(" || ")
}

/// Whether some group holds entirely for a candidate, `compare(bound)` being its ordering.
pub fn holds<V>(groups: &[Vec<(Operator, V)>], compare: impl Fn(&V) -> Ordering) -> bool {
    groups
        .iter()
        .any(|group| group.iter().all(|((_, holds), bound)| holds(compare(bound))))
}
