//! The work budget of dependency evaluation: every requirement evaluated against a bundle is
//! charged its worst-case cost before it runs, so a catalog can make no check or plan do more than
//! its budget, whatever its bundles declare.
//!
//! A unit is one step as [`Requirement::cost`] counts it: a `package` or `gvk` comparison is one,
//! a CEL rule its static worst-case estimate. The budgets below were set from measurements
//! (docs/resolution.md, "Planning with a budget"): the largest real problems use a small fraction
//! of them, and a problem at its budget finishes within a few seconds on this project's machines.

use super::{BundleFacts, Requirement};

/// The work of one plan (`olmv1 resolve --with-dependencies`, `install --with-dependencies`,
/// `explain`): every requirement of every candidate reached, against every candidate that may
/// satisfy it. The real catalogs' largest plans use under 0.1% of it.
pub const PLAN_WORK_UNITS: u64 = 50_000_000;

/// The work of one dependency check of the controller (a bundle's requirements against the
/// installed bundles and served APIs, and the installed dependents' requirements against the
/// change): a reconcile worker never spends more than this on a catalog's requirements.
pub const CHECK_WORK_UNITS: u64 = 20_000_000;

/// A budget of work units, spent as requirements are evaluated.
#[derive(Debug, Clone)]
pub struct WorkBudget {
    limit: u64,
    spent: u64,
}

/// The budget ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("needs more than the budget of {limit} work units")]
pub struct OverBudget {
    /// The budget.
    pub limit: u64,
}

impl WorkBudget {
    /// A budget of `limit` units.
    pub fn new(limit: u64) -> WorkBudget {
        WorkBudget { limit, spent: 0 }
    }

    /// Takes `units` from the budget, or fails (taking nothing) when they are not left.
    pub fn charge(&mut self, units: u64) -> Result<(), OverBudget> {
        let spent = self.spent.saturating_add(units);
        if spent > self.limit {
            return Err(OverBudget { limit: self.limit });
        }
        self.spent = spent;
        Ok(())
    }

    /// Charges one evaluation of `requirement` against `bundle`, before it runs.
    pub fn charge_evaluation(
        &mut self,
        requirement: &Requirement,
        bundle: &BundleFacts<'_>,
    ) -> Result<(), OverBudget> {
        self.charge(requirement.cost_for(bundle))
    }

    /// The units spent so far (never more than the limit).
    pub fn spent(&self) -> u64 {
        self.spent
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_over_the_limit_fails_and_takes_nothing() {
        let mut budget = WorkBudget::new(10);
        assert_eq!(budget.charge(7), Ok(()));
        assert_eq!(budget.charge(4), Err(OverBudget { limit: 10 }));
        assert_eq!(budget.spent(), 7);
        assert_eq!(budget.charge(3), Ok(()));
        assert_eq!(budget.spent(), 10);
        assert_eq!(budget.charge(u64::MAX), Err(OverBudget { limit: 10 }));
        assert_eq!(
            OverBudget { limit: 10 }.to_string(),
            "needs more than the budget of 10 work units"
        );
    }
}
