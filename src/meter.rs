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
    /// A requirement evaluated against a bundle: `LEAF_UNITS` per `package` or `gvk` leaf, 1 per
    /// compound node, a CEL rule its worst-case estimate for the bundle's size ([`crate::meter`]'s unit is
    /// the estimate's unit: one node visited or one byte copied, compared or scanned), plus a
    /// fixed part per evaluation.
    Evaluate,
    /// A CEL rule's cost estimated for an input size: per AST node walked.
    Estimate,
    /// A CEL rule compiled (parsed on the parser thread, checked, typed): per byte of source, a
    /// fixed part per rule and a part per error the parser reports, all in source bytes.
    CompileCel,
    /// A `matches` pattern compiled into its automaton: per byte of the pattern's compiled
    /// automaton (bounded by the pattern's size limit) and a fixed part per pattern.
    CompileRegex,
    /// Text rendered from catalog content (keys, messages, cells): per byte.
    Render,
    /// Catalog text parsed (a requirement's JSON, a bundle's facts): per byte, and a requirement's
    /// tree a part per node (its version ranges parsed).
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
            Work::Estimate => 8,
            Work::CompileCel => 4,
            Work::CompileRegex => 1,
            Work::Render => 1,
            Work::Parse => 5,
            Work::Visit => 4,
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
    /// The limit a charge last ran into ([`Meter::exhausted`]).
    exhausted: Option<Exhausted>,
    /// For a part ([`Meter::part`]): the whole's limits where they are as tight as its own.
    whole: WholeLimits,
    /// For a part: the first of its whole's limits a charge ran into, which [`Meter::absorb`]
    /// carries over (kept even when a later charge is refused at the part's own limit).
    ran_into_whole: Option<Exhausted>,
}

/// The limits a part took from its whole: the whole's budget when the whole had no more left than
/// the part's own budget, the whole's time limit when its deadline came first.
#[derive(Debug, Clone, Copy, Default)]
struct WholeLimits {
    /// The whole's budget and the part's own, when the part's was cut to what the whole had left
    /// (or the whole had exactly that much left).
    work: Option<(u64, u64)>,
    /// The whole's time limit, when the part's deadline is the whole's.
    time: Option<Duration>,
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
            exhausted: None,
            whole: WholeLimits::default(),
            ran_into_whole: None,
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
        let charged = self.take(kind, quantity);
        if let Err(e) = charged {
            self.exhausted = Some(e);
        }
        charged
    }

    fn take(&mut self, kind: Work, quantity: u64) -> Result<(), Exhausted> {
        let units = quantity.saturating_mul(kind.weight()).max(1);
        let spent = self.spent.saturating_add(units);
        if spent > self.limit {
            return Err(match self.whole.work {
                // A part cut to what its whole had left, past its own larger budget too: the
                // refusal is its own (the item alone needs more than an item may have).
                Some((_, own)) if own > self.limit && spent > own => Exhausted::Work { limit: own },
                // Its whole had no more left than this part may spend: the whole ran out too.
                Some((whole, _)) => {
                    self.ran_into_whole
                        .get_or_insert(Exhausted::Work { limit: whole });
                    Exhausted::Work { limit: self.limit }
                }
                None => Exhausted::Work { limit: self.limit },
            });
        }
        self.unclocked = self.unclocked.saturating_add(units);
        if self.unclocked >= CLOCK_EVERY_UNITS {
            self.unclocked = 0;
            if let Err(e) = self.check_deadline() {
                if let Some(limit) = self.whole.time {
                    self.ran_into_whole.get_or_insert(Exhausted::Time { limit });
                }
                return Err(e);
            }
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

    /// Records that the deadline passed, as a refused charge would, when work that reads the
    /// clock itself found it (a solver's search, cancelled at [`Meter::deadline`]), so that
    /// [`Meter::exhausted`] and a whole's [`Meter::absorb`] see it.
    pub fn ran_out_of_time(&mut self) {
        let Some((_, limit)) = self.deadline else {
            return;
        };
        self.exhausted = Some(Exhausted::Time { limit });
        if let Some(limit) = self.whole.time {
            self.ran_into_whole.get_or_insert(Exhausted::Time { limit });
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
    /// added back with [`Meter::absorb`], and with it whether the part ran into this meter's
    /// limits rather than its own (a command's meter over items that each have their own: see
    /// [`Meter::exhausted`]).
    pub fn part(&self, limit: u64, duration: Duration) -> Meter {
        let mut part = Meter::new(limit.min(self.left())).with_deadline(duration);
        if self.left() <= limit {
            part.whole.work = Some((self.limit, limit));
        }
        if let (Some((own, _)), Some((theirs, their_limit))) = (part.deadline, self.deadline)
            && theirs < own
        {
            part.deadline = Some((theirs, their_limit));
            part.whole.time = Some(their_limit);
        }
        part
    }

    /// Adds what `part` (made by [`Meter::part`]) spent to this meter's account; when the part
    /// ran into a limit it took from this meter, this meter has run out of it too. The deadline
    /// is read here as well: a part's work under [`CLOCK_EVERY_UNITS`] never reads it, and a
    /// command's meter charged only through parts would otherwise never see it pass.
    pub fn absorb(&mut self, part: &Meter) {
        self.spent = self.spent.saturating_add(part.spent).min(self.limit);
        for (mine, theirs) in self.by_kind.iter_mut().zip(part.by_kind) {
            *mine = mine.saturating_add(theirs);
        }
        if let Some(whole) = part.ran_into_whole {
            self.exhausted = Some(whole);
        } else if let Err(e) = self.check_deadline() {
            self.exhausted = Some(e);
        }
    }

    /// The limit this meter ran out of, if a charge was refused: its own, or one of its own
    /// limits that a part ([`Meter::part`], [`Meter::absorb`]) ran into. Work past it is not
    /// started (the rest of a command's items, each on a part of its meter).
    pub fn exhausted(&self) -> Option<Exhausted> {
        self.exhausted
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
    fn a_part_that_runs_into_its_wholes_budget_exhausts_the_whole() {
        let mut whole = Meter::new(100);
        // The part's own budget is the tighter one: its refusal is its own.
        let mut part = whole.part(30, Duration::from_secs(60));
        assert_eq!(
            part.charge(Work::Evaluate, 31),
            Err(Exhausted::Work { limit: 30 })
        );
        part.charge(Work::Evaluate, 30).unwrap();
        whole.absorb(&part);
        assert_eq!((whole.spent(), whole.exhausted()), (30, None));
        // 70 left, a part of 80 asked: capped at 70; running into it is the whole's.
        let mut part = whole.part(80, Duration::from_secs(60));
        assert_eq!(part.limit(), 70);
        part.charge(Work::Evaluate, 60).unwrap();
        assert_eq!(
            part.charge(Work::Evaluate, 11),
            Err(Exhausted::Work { limit: 70 })
        );
        whole.absorb(&part);
        assert_eq!(whole.spent(), 90);
        assert_eq!(whole.exhausted(), Some(Exhausted::Work { limit: 100 }));
        // A charge past the part's own budget is refused as the part's, capped or not.
        let mut whole = Meter::new(100);
        whole.charge(Work::Evaluate, 30).unwrap();
        let mut part = whole.part(80, Duration::from_secs(60));
        assert_eq!(
            part.charge(Work::Evaluate, 81),
            Err(Exhausted::Work { limit: 80 })
        );
        whole.absorb(&part);
        assert_eq!(whole.exhausted(), None);
        // A capped part that is not refused leaves the whole as it was.
        let mut whole = Meter::new(10);
        let mut part = whole.part(20, Duration::from_secs(60));
        part.charge(Work::Evaluate, 10).unwrap();
        whole.absorb(&part);
        assert_eq!((whole.left(), whole.exhausted()), (0, None));
        // The whole's own refusal is kept too.
        assert_eq!(whole.charge(Work::Visit, 1), Err(Exhausted::Work { limit: 10 }));
        assert_eq!(whole.exhausted(), Some(Exhausted::Work { limit: 10 }));
        // A part whose own budget is all its whole has left (a command's first item, when an
        // item may spend the command's whole budget): running out is the whole's too.
        let mut whole = Meter::new(100);
        let mut part = whole.part(100, Duration::from_secs(60));
        assert_eq!(
            part.charge(Work::Evaluate, 101),
            Err(Exhausted::Work { limit: 100 })
        );
        whole.absorb(&part);
        assert_eq!(whole.exhausted(), Some(Exhausted::Work { limit: 100 }));
        // Running into the whole's budget is not forgotten when a later, bigger charge is
        // refused at the part's own.
        let mut whole = Meter::new(100);
        whole.charge(Work::Evaluate, 30).unwrap();
        let mut part = whole.part(80, Duration::from_secs(60));
        assert!(part.charge(Work::Evaluate, 71).is_err());
        assert_eq!(
            part.charge(Work::Evaluate, 81),
            Err(Exhausted::Work { limit: 80 })
        );
        whole.absorb(&part);
        assert_eq!(whole.exhausted(), Some(Exhausted::Work { limit: 100 }));
    }

    #[test]
    fn a_wholes_deadline_is_read_when_a_part_is_absorbed() {
        let mut whole = Meter::unlimited().with_deadline(Duration::ZERO);
        std::thread::sleep(Duration::from_millis(1));
        // Each part is far under CLOCK_EVERY_UNITS: none of them reads the clock.
        let mut part = whole.part(10, Duration::from_secs(60));
        part.charge(Work::Evaluate, 1).unwrap();
        whole.absorb(&part);
        assert_eq!(
            whole.exhausted(),
            Some(Exhausted::Time {
                limit: Duration::ZERO
            })
        );
    }

    #[test]
    fn a_part_that_runs_into_its_wholes_deadline_exhausts_the_whole() {
        let mut whole = Meter::unlimited().with_deadline(Duration::ZERO);
        let mut part = whole.part(u64::MAX, Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(1));
        assert_eq!(
            part.charge(Work::Evaluate, CLOCK_EVERY_UNITS),
            Err(Exhausted::Time {
                limit: Duration::ZERO
            })
        );
        whole.absorb(&part);
        assert_eq!(
            whole.exhausted(),
            Some(Exhausted::Time {
                limit: Duration::ZERO
            })
        );
        // A part's own deadline passing is the part's alone.
        let mut whole = Meter::unlimited().with_deadline(Duration::from_secs(60));
        let mut part = whole.part(u64::MAX, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(1));
        assert!(part.charge(Work::Evaluate, CLOCK_EVERY_UNITS).is_err());
        whole.absorb(&part);
        assert_eq!(whole.exhausted(), None);
    }

    #[test]
    fn a_deadline_found_by_work_that_reads_the_clock_itself_is_recorded() {
        // A part whose deadline is its whole's: the whole has run out of time too.
        let mut whole = Meter::unlimited().with_deadline(Duration::from_millis(1));
        let mut part = whole.part(u64::MAX, Duration::from_secs(60));
        part.ran_out_of_time();
        let time = Exhausted::Time {
            limit: Duration::from_millis(1),
        };
        assert_eq!(part.exhausted(), Some(time));
        whole.absorb(&part);
        assert_eq!(whole.exhausted(), Some(time));
        // A part's own deadline: the part's alone.
        let mut whole = Meter::unlimited().with_deadline(Duration::from_secs(60));
        let mut part = whole.part(u64::MAX, Duration::from_millis(1));
        part.ran_out_of_time();
        assert_eq!(part.exhausted(), Some(time));
        whole.absorb(&part);
        assert_eq!(whole.exhausted(), None);
        // No deadline: nothing ran out.
        let mut meter = Meter::unlimited();
        meter.ran_out_of_time();
        assert_eq!(meter.exhausted(), None);
    }

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
