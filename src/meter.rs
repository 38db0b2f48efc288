//! The one meter of catalog-driven work: work units and a deadline.
//!
//! Catalogs are published by third parties, and everything olmv1 computes from them (the
//! controller's dependency check, `resolve`, `explain`, `versions`, `search`, `upgrades`, `migrate
//! check`) charges one [`Meter`] before each piece of work: a requirement evaluated against a
//! bundle, a CEL rule's cost estimated or compiled, a `matches` pattern compiled, a text rendered,
//! catalog entries read. Each kind of [`Work`] is counted in its own natural quantity (AST nodes,
//! source bytes, automaton states, bytes of text, entries) and converted to work units by a weight
//! calibrated against measured CPU (`cargo bench --bench meter` prints nanoseconds per unit for
//! each kind), so that a budget of units is a budget of CPU whatever the work is made of. The
//! deadline is read every [`CLOCK_EVERY_UNITS`] units, so it holds to within a few milliseconds
//! of charged work (docs/limits-and-faults.md, "One meter for catalog-driven work").

use std::{
    fmt,
    time::{Duration, Instant},
};

/// A kind of work, with its weight in units per item of its natural quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Work {
    /// A requirement evaluated against a bundle: 1 per `package` or `gvk` leaf and per compound
    /// node, a CEL rule its worst-case estimate for the bundle's size ([`crate::meter`]'s unit is
    /// the estimate's unit: one node visited or one byte copied, compared or scanned), plus a
    /// fixed part per evaluation.
    Evaluate,
    /// A CEL rule's cost estimated for an input size: per AST node walked.
    Estimate,
    /// A CEL rule compiled (parsed on the parser thread, checked, typed): per byte of source and
    /// per AST node (both are passed as one quantity: bytes + nodes).
    CompileCel,
    /// A `matches` pattern compiled into its automaton: per byte of the pattern's compiled
    /// automaton (bounded by the pattern's size limit).
    CompileRegex,
    /// Text rendered from catalog content (keys, messages, cells): per byte.
    Render,
    /// Catalog text parsed (a requirement's JSON): per byte.
    Parse,
    /// Catalog content visited by a loop (bundles, channel entries, edges, deprecation entries,
    /// packages considered): per item.
    Visit,
}

impl Work {
    /// Every kind, in the order [`Meter::spent_on`] and the calibration benchmark list them.
    pub const ALL: [Work; 7] = [
        Work::Evaluate,
        Work::Estimate,
        Work::CompileCel,
        Work::CompileRegex,
        Work::Render,
        Work::Parse,
        Work::Visit,
    ];

    /// Units per item of this kind's quantity: measured CPU per item divided by the CPU of one
    /// evaluation unit (`cargo bench --bench meter`; docs/limits-and-faults.md lists the
    /// figures). Every kind then costs about the same CPU per unit.
    pub const fn weight(self) -> u64 {
        match self {
            Work::Evaluate => 1,
            Work::Estimate => 40,
            Work::CompileCel => 200,
            Work::CompileRegex => 2,
            Work::Render => 1,
            Work::Parse => 4,
            Work::Visit => 20,
        }
    }

    /// A short name for messages and the benchmark's table.
    pub const fn name(self) -> &'static str {
        match self {
            Work::Evaluate => "evaluate",
            Work::Estimate => "estimate",
            Work::CompileCel => "compile CEL",
            Work::CompileRegex => "compile regex",
            Work::Render => "render",
            Work::Parse => "parse",
            Work::Visit => "visit",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How often the clock is read: after this many units charged since it was last read (a few
/// milliseconds of work at the calibrated rate).
pub const CLOCK_EVERY_UNITS: u64 = 100_000;

/// The meter ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Exhausted {
    /// The work units ran out.
    #[error("needs more than the budget of {limit} work units")]
    Work {
        /// The budget.
        limit: u64,
    },
    /// The deadline passed.
    #[error("takes longer than the limit of {} s", limit.as_secs_f64())]
    Time {
        /// The time allowed.
        limit: Duration,
    },
}

/// Work refused because its meter ran out: what was being done (naming the bundle, property or
/// package) and the limit, as one sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {exhausted}")]
pub struct Refused {
    /// What was being done, e.g. `bundle "b": reading its olm.constraint dependency`.
    pub what: String,
    /// The budget or deadline that ran out.
    pub exhausted: Exhausted,
}

impl Refused {
    /// `what` refused for `exhausted`.
    pub fn new(what: impl Into<String>, exhausted: Exhausted) -> Refused {
        Refused {
            what: what.into(),
            exhausted,
        }
    }
}

/// A budget of work units and, optionally, a deadline; charged before work is done.
#[derive(Debug, Clone)]
pub struct Meter {
    limit: u64,
    spent: u64,
    by_kind: [u64; Work::ALL.len()],
    deadline: Option<(Instant, Duration)>,
    /// Units charged since the clock was last read.
    unclocked: u64,
}

impl Meter {
    /// A budget of `limit` units and no deadline.
    pub fn new(limit: u64) -> Meter {
        Meter {
            limit,
            spent: 0,
            by_kind: [0; Work::ALL.len()],
            deadline: None,
            unclocked: 0,
        }
    }

    /// A meter with no limit: for callers whose input is already bounded, and tests.
    pub fn unlimited() -> Meter {
        Meter::new(u64::MAX)
    }

    /// This meter with a deadline `limit` from now.
    pub fn with_deadline(mut self, limit: Duration) -> Meter {
        self.deadline = Some((Instant::now() + limit, limit));
        self
    }

    /// Takes `quantity` items of `kind` (at least one unit), or fails taking nothing when they
    /// are not left or the deadline has passed.
    pub fn charge(&mut self, kind: Work, quantity: u64) -> Result<(), Exhausted> {
        let units = quantity.saturating_mul(kind.weight()).max(1);
        let spent = self.spent.saturating_add(units);
        if spent > self.limit {
            return Err(Exhausted::Work { limit: self.limit });
        }
        self.unclocked = self.unclocked.saturating_add(units);
        if self.unclocked >= CLOCK_EVERY_UNITS {
            self.unclocked = 0;
            self.check_deadline()?;
        }
        self.spent = spent;
        self.by_kind[kind.index()] = self.by_kind[kind.index()].saturating_add(units);
        Ok(())
    }

    /// Fails when the deadline has passed (for loops whose work is charged elsewhere or in
    /// bulk, and for work that cannot be charged before it runs, such as a solver's search).
    pub fn check_deadline(&self) -> Result<(), Exhausted> {
        match self.deadline {
            Some((at, limit)) if Instant::now() > at => Err(Exhausted::Time { limit }),
            _ => Ok(()),
        }
    }

    /// Whether the deadline has passed.
    pub fn past_deadline(&self) -> bool {
        self.check_deadline().is_err()
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline.map(|(at, _)| at)
    }

    /// The time allowed, if any.
    pub fn time_limit(&self) -> Option<Duration> {
        self.deadline.map(|(_, limit)| limit)
    }

    /// A meter for a part of this one's work with its own limits: at most `limit` units and
    /// `duration`, and never more than this one has left or past its deadline. What it spends is
    /// added back with [`Meter::absorb`].
    pub fn part(&self, limit: u64, duration: Duration) -> Meter {
        let mut part = Meter::new(limit.min(self.left())).with_deadline(duration);
        if let (Some((own, _)), Some((theirs, their_limit))) = (part.deadline, self.deadline)
            && theirs < own
        {
            part.deadline = Some((theirs, their_limit));
        }
        part
    }

    /// Adds what `part` (made by [`Meter::part`]) spent to this meter's account.
    pub fn absorb(&mut self, part: &Meter) {
        self.spent = self.spent.saturating_add(part.spent).min(self.limit);
        for (mine, theirs) in self.by_kind.iter_mut().zip(part.by_kind) {
            *mine = mine.saturating_add(theirs);
        }
    }

    /// The units spent so far (never more than the limit).
    pub fn spent(&self) -> u64 {
        self.spent
    }

    /// The units spent on one kind of work.
    pub fn spent_on(&self, kind: Work) -> u64 {
        self.by_kind[kind.index()]
    }

    /// The budget.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The units left.
    pub fn left(&self) -> u64 {
        self.limit - self.spent
    }
}

impl fmt::Display for Meter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {} work units", self.spent, self.limit)?;
        for kind in Work::ALL {
            let spent = self.spent_on(kind);
            if spent > 0 {
                write!(f, ", {} {spent}", kind.name())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_over_the_limit_fails_and_takes_nothing() {
        let mut meter = Meter::new(10);
        assert_eq!(meter.charge(Work::Evaluate, 7), Ok(()));
        assert_eq!(
            meter.charge(Work::Evaluate, 4),
            Err(Exhausted::Work { limit: 10 })
        );
        assert_eq!(meter.spent(), 7);
        assert_eq!(meter.charge(Work::Evaluate, 3), Ok(()));
        assert_eq!(meter.spent(), 10);
        assert_eq!(
            meter.charge(Work::Evaluate, u64::MAX),
            Err(Exhausted::Work { limit: 10 })
        );
        assert_eq!(
            Exhausted::Work { limit: 10 }.to_string(),
            "needs more than the budget of 10 work units"
        );
    }

    #[test]
    fn kinds_are_weighted_and_counted_apart() {
        let mut meter = Meter::unlimited();
        meter.charge(Work::Estimate, 3).unwrap();
        meter.charge(Work::Render, 0).unwrap();
        assert_eq!(meter.spent_on(Work::Estimate), 3 * Work::Estimate.weight());
        // Every charge takes at least one unit.
        assert_eq!(meter.spent_on(Work::Render), 1);
        assert_eq!(meter.spent(), 3 * Work::Estimate.weight() + 1);
    }

    #[test]
    fn the_deadline_is_read_every_so_many_units() {
        let mut meter = Meter::unlimited().with_deadline(Duration::ZERO);
        // Under the clock's interval the charge does not read it.
        assert_eq!(meter.charge(Work::Evaluate, CLOCK_EVERY_UNITS - 1), Ok(()));
        std::thread::sleep(Duration::from_millis(1));
        assert_eq!(
            meter.charge(Work::Evaluate, 1),
            Err(Exhausted::Time {
                limit: Duration::ZERO
            })
        );
        assert!(meter.past_deadline());
        assert_eq!(
            Exhausted::Time {
                limit: Duration::from_secs(10)
            }
            .to_string(),
            "takes longer than the limit of 10 s"
        );
    }
}
