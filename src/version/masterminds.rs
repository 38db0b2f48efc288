//! Masterminds/semver v3 constraints, the syntax of `spec.source.catalog.version`.
//!
//! Semantics follow Masterminds v3.5 (`NewConstraint` + `Check`, `IncludePrerelease` unset): `||`
//! separates OR groups, whitespace or a comma separates AND terms, `a - b` is a hyphen range,
//! `x`/`X`/`*` and missing parts are wildcards, build metadata is ignored, and a prerelease version
//! matches only when some constraint of the same AND group names a prerelease.

use std::{cmp::Ordering, fmt, sync::LazyLock};

use regex::Regex;

use super::{
    MAX_RANGE_ALTERNATIVES, MAX_RANGE_COMPARATORS, VersionError, check_range_bytes, check_range_terms,
};

/// Go's `\s` (RE2): no vertical tab, no Unicode spaces.
const WS: &str = r"[\t\n\f\r ]";
const OPS: &str = r"=||!=|>|<|>=|=>|<=|=<|~|~>|\^";
const CV: &str = concat!(
    r"v?([0-9|x|X|\*]+)(\.[0-9|x|X|\*]+)?(\.[0-9|x|X|\*]+)?",
    r"(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?",
    r"(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?"
);

fn compile(pattern: String) -> Regex {
    // The patterns are constants of this file; a failure is a programming error caught by any test.
    Regex::new(&pattern).expect("constant regex compiles")
}

static CONSTRAINT: LazyLock<Regex> = LazyLock::new(|| compile(format!("^{WS}*({OPS}){WS}*({CV}){WS}*$")));
static HYPHEN_RANGE: LazyLock<Regex> =
    LazyLock::new(|| compile(format!("{WS}*({CV}){WS}+-{WS}+({CV}){WS}*")));
static FIND_CONSTRAINT: LazyLock<Regex> = LazyLock::new(|| compile(format!("({OPS}){WS}*({CV})")));
static VALID_AND_GROUP: LazyLock<Regex> = LazyLock::new(|| {
    compile(format!(
        "^({WS}*({OPS}){WS}*({CV}){WS}*)((?:{WS}+|,{WS}*)({OPS}){WS}*({CV}){WS}*)*$"
    ))
});
static LOOSE_VERSION: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        concat!(
            r"^v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?",
            r"(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?",
            r"(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?$"
        )
        .to_string(),
    )
});

/// A version as Masterminds sees it: loose parsing (`1`, `1.2`, `v1.2.3`, leading zeros), build
/// metadata dropped because no comparison looks at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LooseVersion {
    /// Major number.
    pub major: u64,
    /// Minor number (0 when absent).
    pub minor: u64,
    /// Patch number (0 when absent).
    pub patch: u64,
    /// Prerelease without the leading `-`; empty when none.
    pub pre: String,
}

impl LooseVersion {
    /// Parses like Masterminds `NewVersion` (coercing `1` and `1.2`, allowing a `v` prefix).
    pub fn parse(text: &str) -> Option<LooseVersion> {
        let caps = LOOSE_VERSION.captures(text)?;
        let number = |i: usize| -> Option<u64> {
            match caps.get(i) {
                None => Some(0),
                Some(m) => m.as_str().trim_start_matches('.').parse().ok(),
            }
        };
        let pre = caps.get(5).map_or("", |m| m.as_str());
        // Masterminds v3.4+: numeric prerelease identifiers may not have leading zeros.
        if pre
            .split('.')
            .any(|id| id.len() > 1 && id.starts_with('0') && id.bytes().all(|b| b.is_ascii_digit()))
        {
            return None;
        }
        Some(LooseVersion {
            major: number(1)?,
            minor: number(2)?,
            patch: number(3)?,
            pre: pre.to_string(),
        })
    }

    /// Masterminds `Compare`: numbers, then prerelease (a release ranks above its prereleases).
    pub fn compare(&self, other: &LooseVersion) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => compare_prerelease(&self.pre, &other.pre),
            })
    }
}

impl From<&semver::Version> for LooseVersion {
    fn from(v: &semver::Version) -> Self {
        LooseVersion {
            major: v.major,
            minor: v.minor,
            patch: v.patch,
            pre: v.pre.as_str().to_string(),
        }
    }
}

impl fmt::Display for LooseVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        Ok(())
    }
}

fn compare_prerelease(a: &str, b: &str) -> Ordering {
    let (mut left, mut right) = (a.split('.'), b.split('.'));
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (l, r) => {
                let d = compare_prerelease_part(l.unwrap_or(""), r.unwrap_or(""));
                if d != Ordering::Equal {
                    return d;
                }
            }
        }
    }
}

fn compare_prerelease_part(s: &str, o: &str) -> Ordering {
    if s == o {
        return Ordering::Equal;
    }
    if s.is_empty() {
        return Ordering::Less;
    }
    if o.is_empty() {
        return Ordering::Greater;
    }
    match (s.parse::<u64>(), o.parse::<u64>()) {
        (Err(_), Err(_)) => s.cmp(o),
        (Err(_), Ok(_)) => Ordering::Greater,
        (Ok(_), Err(_)) => Ordering::Less,
        (Ok(a), Ok(b)) => a.cmp(&b),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    TildeOrEqual,
    NotEqual,
    Greater,
    Less,
    GreaterEqual,
    LessEqual,
    Tilde,
    Caret,
}

impl Op {
    fn from_text(op: &str) -> Option<Op> {
        Some(match op {
            "" | "=" => Op::TildeOrEqual,
            "!=" => Op::NotEqual,
            ">" => Op::Greater,
            "<" => Op::Less,
            ">=" | "=>" => Op::GreaterEqual,
            "<=" | "=<" => Op::LessEqual,
            "~" | "~>" => Op::Tilde,
            "^" => Op::Caret,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone)]
struct Constraint {
    op: Op,
    con: LooseVersion,
    dirty: bool,
    minor_dirty: bool,
    patch_dirty: bool,
}

fn is_x(part: &str) -> bool {
    matches!(part, "x" | "X" | "*")
}

fn parse_constraint(text: &str) -> Result<Constraint, VersionError> {
    if text.is_empty() {
        // Masterminds: the empty constraint is `*`.
        let con = LooseVersion {
            major: 0,
            minor: 0,
            patch: 0,
            pre: String::new(),
        };
        return Ok(Constraint {
            op: Op::TildeOrEqual,
            con,
            dirty: true,
            minor_dirty: false,
            patch_dirty: false,
        });
    }
    let caps = CONSTRAINT
        .captures(text)
        .ok_or_else(|| VersionError::ImproperConstraint(text.to_string()))?;
    let group = |i: usize| caps.get(i).map_or("", |m| m.as_str());
    let op = Op::from_text(group(1)).ok_or_else(|| VersionError::ImproperConstraint(text.to_string()))?;
    let (major, minor, patch, pre) = (group(3), group(4), group(5), group(6));
    let (mut dirty, mut minor_dirty, mut patch_dirty) = (false, false, false);
    let version_text = if is_x(major) || major.is_empty() {
        dirty = true;
        format!("0.0.0{pre}")
    } else if is_x(minor.trim_start_matches('.')) || minor.is_empty() {
        dirty = true;
        minor_dirty = true;
        format!("{major}.0.0{pre}")
    } else if is_x(patch.trim_start_matches('.')) || patch.is_empty() {
        dirty = true;
        patch_dirty = true;
        format!("{major}{minor}.0{pre}")
    } else {
        group(2).to_string()
    };
    let con = LooseVersion::parse(&version_text).ok_or(VersionError::ConstraintParser)?;
    Ok(Constraint {
        op,
        con,
        dirty,
        minor_dirty,
        patch_dirty,
    })
}

impl Constraint {
    fn check(&self, v: &LooseVersion, include_pre: bool) -> bool {
        if !v.pre.is_empty() && !include_pre {
            return false;
        }
        let c = &self.con;
        match self.op {
            Op::TildeOrEqual if self.dirty => self.tilde(v),
            Op::TildeOrEqual => v.compare(c).is_eq(),
            Op::NotEqual => {
                if self.dirty {
                    if c.major != v.major {
                        return true;
                    }
                    if c.minor != v.minor && !self.minor_dirty {
                        return true;
                    } else if self.minor_dirty {
                        return false;
                    } else if c.patch != v.patch && !self.patch_dirty {
                        return true;
                    } else if self.patch_dirty {
                        if !v.pre.is_empty() || !c.pre.is_empty() {
                            return compare_prerelease(&v.pre, &c.pre) != Ordering::Equal;
                        }
                        return false;
                    }
                }
                !v.compare(c).is_eq()
            }
            Op::Greater => {
                if !self.dirty {
                    return v.compare(c).is_gt();
                }
                if v.major > c.major {
                    true
                } else if v.major < c.major || self.minor_dirty {
                    false
                } else if self.patch_dirty {
                    v.minor > c.minor
                } else {
                    v.compare(c).is_gt()
                }
            }
            Op::Less => v.compare(c).is_lt(),
            Op::GreaterEqual => v.compare(c).is_ge(),
            Op::LessEqual => {
                if !self.dirty {
                    return v.compare(c).is_le();
                }
                !(v.major > c.major || (v.major == c.major && v.minor > c.minor && !self.minor_dirty))
            }
            Op::Tilde => self.tilde(v),
            Op::Caret => {
                if v.compare(c).is_lt() {
                    return false;
                }
                if c.major > 0 || self.minor_dirty {
                    return v.major == c.major;
                }
                if v.major > 0 {
                    return false;
                }
                if c.minor > 0 || self.patch_dirty {
                    return v.minor == c.minor;
                }
                if v.minor > 0 {
                    return false;
                }
                c.patch == v.patch
            }
        }
    }

    fn tilde(&self, v: &LooseVersion) -> bool {
        let c = &self.con;
        if v.compare(c).is_lt() {
            return false;
        }
        if c.major == 0 && c.minor == 0 && c.patch == 0 && !self.minor_dirty && !self.patch_dirty {
            return true;
        }
        if v.major != c.major {
            return false;
        }
        v.minor == c.minor || self.minor_dirty
    }
}

#[derive(Debug, Clone)]
struct AndGroup {
    constraints: Vec<Constraint>,
    /// Some constraint of the group names a prerelease: prerelease versions may match.
    includes_prerelease: bool,
}

/// A parsed `spec.source.catalog.version` (Masterminds semver v3 constraint).
#[derive(Debug, Clone)]
pub struct VersionRange {
    text: String,
    groups: Vec<AndGroup>,
}

impl VersionRange {
    /// Parses a range as Masterminds `NewConstraint` does; the error text is upstream's
    /// (`improper constraint: "foobar"`). A range over [`MAX_RANGE_BYTES`](super::MAX_RANGE_BYTES),
    /// [`MAX_RANGE_ALTERNATIVES`] or [`MAX_RANGE_COMPARATORS`] is refused before any term is parsed.
    pub fn parse(text: &str) -> Result<VersionRange, VersionError> {
        check_range_bytes(text)?;
        let rewritten = rewrite_hyphen_ranges(text);
        let parts: Vec<&str> = rewritten.split("||").collect();
        check_range_terms(text, "alternatives", parts.len(), MAX_RANGE_ALTERNATIVES)?;
        let mut grouped = Vec::with_capacity(parts.len());
        for part in parts {
            if !VALID_AND_GROUP.is_match(part) {
                return Err(VersionError::ImproperConstraint(part.to_string()));
            }
            let mut terms: Vec<&str> = FIND_CONSTRAINT.find_iter(part).map(|m| m.as_str()).collect();
            if terms.is_empty() {
                terms.push(part);
            }
            grouped.push(terms);
        }
        let comparators = grouped.iter().map(Vec::len).sum();
        check_range_terms(text, "comparators", comparators, MAX_RANGE_COMPARATORS)?;
        let mut groups = Vec::with_capacity(grouped.len());
        for terms in grouped {
            let constraints = terms
                .into_iter()
                .map(parse_constraint)
                .collect::<Result<Vec<_>, _>>()?;
            let includes_prerelease = constraints.iter().any(|c| !c.con.pre.is_empty());
            groups.push(AndGroup {
                constraints,
                includes_prerelease,
            });
        }
        Ok(VersionRange {
            text: text.to_string(),
            groups,
        })
    }

    /// The range as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether a bundle version is in the range (build metadata ignored).
    pub fn matches(&self, version: &semver::Version) -> bool {
        self.matches_loose(&LooseVersion::from(version))
    }

    /// Whether a Masterminds version is in the range.
    pub fn matches_loose(&self, version: &LooseVersion) -> bool {
        self.groups.iter().any(|g| {
            g.constraints
                .iter()
                .all(|c| c.check(version, g.includes_prerelease))
        })
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Checks one constraint the way Masterminds' `parseConstraint` + `check` do (prereleases allowed
/// only when the constraint names one; the empty constraint means any). Used by the conformance
/// tables; resolution uses [`VersionRange`].
pub fn check_one_constraint(constraint: &str, version: &LooseVersion) -> Result<bool, VersionError> {
    let c = parse_constraint(constraint)?;
    let include_pre = !c.con.pre.is_empty();
    Ok(c.check(version, include_pre))
}

fn rewrite_hyphen_ranges(text: &str) -> String {
    let mut out = text.to_string();
    for caps in HYPHEN_RANGE.captures_iter(text) {
        let (Some(whole), Some(low), Some(high)) = (caps.get(0), caps.get(1), caps.get(11)) else {
            continue;
        };
        let replacement = format!(">= {}, <= {} ", low.as_str(), high.as_str());
        out = out.replacen(whole.as_str(), &replacement, 1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> LooseVersion {
        LooseVersion::parse(s).unwrap_or_else(|| panic!("bad test version {s}"))
    }

    #[test]
    fn docs_examples_match() {
        let r = VersionRange::parse(">=1.11, <1.13").unwrap();
        assert!(r.matches_loose(&v("1.12.5")));
        assert!(!r.matches_loose(&v("1.13.0")));
        assert_eq!(
            VersionRange::parse("foobar").unwrap_err().to_string(),
            "improper constraint: \"foobar\""
        );
    }

    #[test]
    fn ranges_are_bounded_in_bytes_alternatives_and_comparators() {
        let huge = vec!["1.0.0"; 100_000].join(" || ");
        assert_eq!(
            VersionRange::parse(&huge).unwrap_err().to_string(),
            format!(
                r#"range "{}"... ({} more bytes) is 899996 bytes, over the limit of 1024"#,
                &huge[..128],
                huge.len() - 128
            )
        );
        let at_limit = vec!["1.0.0"; MAX_RANGE_ALTERNATIVES].join(" || ");
        assert!(VersionRange::parse(&at_limit).is_ok());
        assert!(
            VersionRange::parse(&format!("{at_limit} || 2.0.0"))
                .unwrap_err()
                .to_string()
                .ends_with("more bytes) has 33 alternatives, over the limit of 32")
        );
        let at_limit = format!(">=1.0.0{}", ", <2.0.0".repeat(MAX_RANGE_COMPARATORS - 1));
        assert!(VersionRange::parse(&at_limit).is_ok());
        // A hyphen range is two comparators.
        let over = format!("{at_limit}, 1.0.0 - 1.5.0");
        assert!(
            VersionRange::parse(&over)
                .unwrap_err()
                .to_string()
                .ends_with("more bytes) has 66 comparators, over the limit of 64"),
        );
        // Numbers past u64 are refused, never wrapped (nothing in a check adds to them).
        assert!(VersionRange::parse(">18446744073709551616").is_err());
        let r = VersionRange::parse("~18446744073709551615.x").unwrap();
        assert!(r.matches_loose(&v("18446744073709551615.7.1")));
        assert!(!r.matches_loose(&v("1.0.0")));
        let r = VersionRange::parse("^18446744073709551615.18446744073709551615.x").unwrap();
        assert!(r.matches_loose(&v(
            "18446744073709551615.18446744073709551615.18446744073709551615"
        )));
        assert!(!r.matches_loose(&v("0.0.0")));
        // The part named in an error is cut.
        let long = format!("foo{}", "x".repeat(1000));
        assert_eq!(
            VersionRange::parse(&long).unwrap_err().to_string(),
            format!(
                r#"improper constraint: "foo{}"... (875 more bytes)"#,
                "x".repeat(125)
            )
        );
    }

    #[test]
    fn hyphen_ranges_are_rewritten() {
        assert_eq!(rewrite_hyphen_ranges("2 - 3"), ">= 2, <= 3 ");
        assert_eq!(
            rewrite_hyphen_ranges("1.0.0 - 2.0.0 <=2.0.0"),
            ">= 1.0.0, <= 2.0.0 <=2.0.0"
        );
    }
}

/// Property tests: any text is an answer (a range or an error), never a panic; a range printed
/// and parsed again matches the same versions; simple generated ranges mean what they say.
#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;
    use crate::version::generated::{holds, operator, range_text};

    fn version() -> impl Strategy<Value = LooseVersion> {
        (0u64..4, 0u64..4, 0u64..4).prop_map(|(major, minor, patch)| LooseVersion {
            major,
            minor,
            patch,
            pre: String::new(),
        })
    }

    proptest! {
        #[test]
        fn any_text_parses_or_errs_never_panics(text in "\\PC{0,40}") {
            let _ = VersionRange::parse(&text);
        }

        #[test]
        fn range_like_text_parses_or_errs_never_panics(
            text in "[0-9vxX*.,|<>=!~^ -]{0,30}",
            candidate in version(),
        ) {
            if let Ok(range) = VersionRange::parse(&text) {
                let _ = range.matches_loose(&candidate);
            }
        }

        #[test]
        fn print_then_parse_matches_the_same_versions(
            text in "[0-9vxX*.,|<>=!~^ -]{0,30}",
            candidates in proptest::collection::vec(version(), 1..8),
        ) {
            if let Ok(range) = VersionRange::parse(&text) {
                let again = VersionRange::parse(&range.to_string()).expect("a printed range parses");
                for candidate in &candidates {
                    prop_assert_eq!(range.matches_loose(candidate), again.matches_loose(candidate));
                }
            }
        }

        #[test]
        fn generated_ranges_mean_what_they_say(
            groups in proptest::collection::vec(
                proptest::collection::vec((operator(), version()), 1..3),
                1..3,
            ),
            candidate in version(),
        ) {
            let text = range_text(&groups, ", ");
            let range = VersionRange::parse(&text).expect("a generated range parses");
            let expected = holds(&groups, |bound| candidate.compare(bound));
            prop_assert_eq!(range.matches_loose(&candidate), expected, "{} vs {}", text, candidate);
        }
    }
}
