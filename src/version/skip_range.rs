//! skipRange: blang/semver v4 `ParseRange` semantics, kept by OLM v1 for OLM v0 compatibility.
//!
//! Space = AND, `||` = OR (AND binds tighter), operators `< <= > >= = == ! !=` (none = equal),
//! lowercase `x` wildcards, strict `X.Y.Z` versions, no `~`/`^`/hyphen ranges, no special treatment
//! of prereleases; build metadata never takes part in a comparison.

use std::{cmp::Ordering, fmt};

use super::{
    MAX_RANGE_ALTERNATIVES, MAX_RANGE_COMPARATORS, VersionError, check_range_bytes, check_range_terms, quote,
    release::cmp_precedence,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comparator {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl Comparator {
    fn parse(op: &str) -> Option<Comparator> {
        Some(match op {
            "" | "=" | "==" => Comparator::Eq,
            "!" | "!=" => Comparator::Ne,
            ">" => Comparator::Gt,
            ">=" => Comparator::Ge,
            "<" => Comparator::Lt,
            "<=" => Comparator::Le,
            _ => return None,
        })
    }

    fn holds(self, ord: Ordering) -> bool {
        match self {
            Comparator::Eq => ord.is_eq(),
            Comparator::Ne => ord.is_ne(),
            Comparator::Gt => ord.is_gt(),
            Comparator::Ge => ord.is_ge(),
            Comparator::Lt => ord.is_lt(),
            Comparator::Le => ord.is_le(),
        }
    }
}

#[derive(Debug, Clone)]
struct Term {
    comparator: Comparator,
    version: semver::Version,
}

/// A parsed skipRange. [`SkipRange::contains`] answers whether an installed version is covered.
#[derive(Debug, Clone)]
pub struct SkipRange {
    text: String,
    /// OR of AND groups.
    groups: Vec<Vec<Term>>,
}

impl SkipRange {
    /// Parses like blang `ParseRange`; errors carry blang's wording. A range over
    /// [`MAX_RANGE_BYTES`](super::MAX_RANGE_BYTES), [`MAX_RANGE_ALTERNATIVES`] or
    /// [`MAX_RANGE_COMPARATORS`] is refused before any term is parsed.
    pub fn parse(text: &str) -> Result<SkipRange, VersionError> {
        check_range_bytes(text)?;
        let parts = split_and_trim(text);
        let bars = parts.iter().filter(|p| *p == "||").count();
        check_range_terms(text, "alternatives", bars + 1, MAX_RANGE_ALTERNATIVES)?;
        check_range_terms(text, "comparators", parts.len() - bars, MAX_RANGE_COMPARATORS)?;
        let or_parts = split_or_parts(&parts)?;
        let mut groups = Vec::with_capacity(or_parts.len());
        for and_parts in or_parts {
            let mut terms = Vec::new();
            for part in expand_wildcards(and_parts)? {
                let (op, version_text) = split_comparator_version(&part)?;
                let comparator = Comparator::parse(op).ok_or_else(|| {
                    VersionError::InvalidSkipRange(format!(
                        "Could not parse Range {}: Could not parse comparator {} in {}",
                        quote(&part),
                        quote(op),
                        quote(&part)
                    ))
                })?;
                let version = super::parse_strict(version_text).map_err(|e| {
                    VersionError::InvalidSkipRange(format!(
                        "Could not parse Range {}: Could not parse version {} in {}: {e}",
                        quote(&part),
                        quote(version_text),
                        quote(&part)
                    ))
                })?;
                terms.push(Term { comparator, version });
            }
            groups.push(terms);
        }
        if groups.iter().all(|g| g.is_empty()) {
            return Err(VersionError::InvalidSkipRange(format!(
                "Could not parse Range {}: empty range",
                quote(text)
            )));
        }
        // blang builds no function for an empty alternative and panics when the range is
        // evaluated; taken as "any version" it would let a catalog satisfy any requirement.
        if groups.iter().any(|g| g.is_empty()) {
            return Err(VersionError::InvalidSkipRange(format!(
                "Could not parse Range {}: an alternative between '||' is empty",
                quote(text)
            )));
        }
        Ok(SkipRange {
            text: text.to_string(),
            groups,
        })
    }

    /// Whether `version` is in the range (build metadata ignored, prereleases compared normally).
    pub fn contains(&self, version: &semver::Version) -> bool {
        self.groups.iter().any(|terms| {
            terms
                .iter()
                .all(|t| t.comparator.holds(cmp_precedence(version, &t.version)))
        })
    }

    /// The range as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for SkipRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// blang `splitAndTrim`: split on spaces, except a space right after `>`, `<` or `=`; then drop the
/// spaces inside each part.
fn split_and_trim(s: &str) -> Vec<String> {
    let bytes = s.as_bytes();
    let mut result = Vec::new();
    let mut last = 0usize;
    let mut last_char = 0u8;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b' ' && !matches!(last_char, b'>' | b'<' | b'=') {
            // blang keeps only segments of two or more characters.
            if last + 1 < i {
                result.push(s[last..i].to_string());
            }
            last = i + 1;
        } else if b != b' ' {
            last_char = b;
        }
    }
    if last + 1 < s.len() {
        result.push(s[last..].to_string());
    }
    result.into_iter().map(|p| p.replace(' ', "")).collect()
}

fn split_or_parts(parts: &[String]) -> Result<Vec<Vec<String>>, VersionError> {
    let mut or_parts = Vec::new();
    let mut last = 0usize;
    for (i, p) in parts.iter().enumerate() {
        if p == "||" {
            if i == 0 {
                return Err(VersionError::InvalidSkipRange(
                    "First element in range is '||'".to_string(),
                ));
            }
            or_parts.push(parts[last..i].to_vec());
            last = i + 1;
        }
    }
    if last == parts.len() {
        return Err(VersionError::InvalidSkipRange(
            "Last element in range is '||'".to_string(),
        ));
    }
    or_parts.push(parts[last..].to_vec());
    Ok(or_parts)
}

fn split_comparator_version(s: &str) -> Result<(&str, &str), VersionError> {
    let i = s.find(|c: char| c.is_ascii_digit()).ok_or_else(|| {
        VersionError::InvalidSkipRange(format!("Could not get version from string: {}", quote(s)))
    })?;
    Ok((s[..i].trim(), &s[i..]))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wildcard {
    None,
    Major,
    Minor,
    Patch,
}

fn wildcard_type(version: &str) -> Wildcard {
    let parts: Vec<&str> = version.split('.').collect();
    if parts.last() != Some(&"x") {
        return Wildcard::None;
    }
    match parts.len() {
        1 => Wildcard::Major,
        2 => Wildcard::Minor,
        3 => Wildcard::Patch,
        _ => Wildcard::None,
    }
}

fn flatten_wildcard(version: &str) -> String {
    let v = version.replacen(".x.x", ".x", 1).replacen(".x", ".0", 1);
    if v.split('.').count() == 2 {
        format!("{v}.0")
    } else {
        v
    }
}

/// blang's `incrementMajorVersion`/`incrementMinorVersion`: the number at `index` plus one. The
/// largest number has no successor: the term is refused (blang's `Atoi` refuses it too), never
/// wrapped to 0, which would turn `>18446744073709551615.x` into `>=0.0.0`.
fn increment(version: &str, index: usize, part: &str) -> Result<String, VersionError> {
    let mut parts: Vec<String> = version.split('.').map(str::to_string).collect();
    if let Some(n) = parts.get(index).and_then(|p| p.parse::<u64>().ok()) {
        let next = n.checked_add(1).ok_or_else(|| {
            VersionError::InvalidSkipRange(format!(
                "Could not parse Range {}: the wildcard needs a version number above {n}, the largest there is",
                quote(part)
            ))
        })?;
        parts[index] = next.to_string();
    }
    Ok(parts.join("."))
}

/// blang `expandWildcardVersion`: `1.2.x` terms become plain comparisons.
fn expand_wildcards(parts: Vec<String>) -> Result<Vec<String>, VersionError> {
    let mut out = Vec::with_capacity(parts.len());
    for part in parts {
        if !part.contains('x') {
            out.push(part);
            continue;
        }
        let (op, version) = split_comparator_version(&part)?;
        let kind = wildcard_type(version);
        let flat = flatten_wildcard(version);
        let (result_op, bump) = match op {
            ">" => (">=", true),
            ">=" => (">=", false),
            "<" => ("<", false),
            "<=" => ("<", true),
            "" | "=" | "==" => {
                out.push(format!(">={flat}"));
                ("<", true)
            }
            "!=" | "!" => {
                out.push(format!("<{flat}"));
                (">=", true)
            }
            _ => ("", false),
        };
        let result_version = if bump {
            match kind {
                Wildcard::Patch => increment(&flat, 1, &part)?,
                Wildcard::Minor => increment(&flat, 0, &part)?,
                _ => String::new(),
            }
        } else {
            flat
        };
        out.push(format!("{result_op}{result_version}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_trim_keeps_operator_with_version() {
        assert_eq!(
            split_and_trim("  >=   1.2.3   <=  1.2.3   "),
            vec![">=1.2.3", "<=1.2.3"]
        );
    }

    #[test]
    fn an_empty_alternative_is_refused_never_any_version() {
        let err = SkipRange::parse(">1.0.0 || || >2.0.0").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"Could not parse Range ">1.0.0 || || >2.0.0": an alternative between '||' is empty"#
        );
    }

    #[test]
    fn unparsable_ranges_are_errors() {
        for bad in [
            ">>1.2.3",
            "1.0",
            "string",
            "",
            "fo.ob.ar.x",
            "|| >1.0.0",
            ">1.0.0 ||",
        ] {
            assert!(SkipRange::parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn ranges_are_bounded_in_bytes_alternatives_and_comparators() {
        // The issue's range: 100,000 `||` terms, refused on its length alone.
        let huge = vec!["1.0.0"; 100_000].join(" || ");
        assert_eq!(
            SkipRange::parse(&huge).unwrap_err().to_string(),
            format!(
                r#"range "{}"... ({} more bytes) is 899996 bytes, over the limit of 1024"#,
                &huge[..128],
                huge.len() - 128
            )
        );
        let at_limit = vec!["1.0.0"; MAX_RANGE_ALTERNATIVES].join(" || ");
        assert!(SkipRange::parse(&at_limit).is_ok());
        let over = format!("{at_limit} || 2.0.0");
        assert_eq!(
            SkipRange::parse(&over).unwrap_err().to_string(),
            format!(
                r#"range "{}"... ({} more bytes) has 33 alternatives, over the limit of 32"#,
                &over[..128],
                over.len() - 128
            )
        );
        let at_limit = format!(">=1.0.0 {}", "<2.0.0 ".repeat(MAX_RANGE_COMPARATORS - 1));
        assert!(SkipRange::parse(&at_limit).is_ok());
        let over = format!("{at_limit}!=1.5.0");
        assert!(
            SkipRange::parse(&over)
                .unwrap_err()
                .to_string()
                .ends_with("more bytes) has 65 comparators, over the limit of 64"),
        );
        let exactly = format!(">={}", "0".repeat(super::super::MAX_RANGE_BYTES - 3) + "1");
        assert!(!matches!(
            SkipRange::parse(&exactly),
            Err(VersionError::RangeTooLong { .. })
        ));
    }

    #[test]
    fn wildcard_bumps_cannot_overflow() {
        for (range, number) in [
            (">18446744073709551615.x", "18446744073709551615"),
            ("<=18446744073709551615.x", "18446744073709551615"),
            ("18446744073709551615.x", "18446744073709551615"),
            ("<=1.18446744073709551615.x", "18446744073709551615"),
            (">1.18446744073709551615.x", "18446744073709551615"),
        ] {
            assert_eq!(
                SkipRange::parse(range).unwrap_err().to_string(),
                format!(
                    "Could not parse Range \"{range}\": the wildcard needs a version number above {number}, the largest there is"
                ),
            );
        }
        // Below the largest number the bump still works, and matches only what it should.
        let r = SkipRange::parse(">1.18446744073709551614.x").unwrap();
        assert!(r.contains(&semver::Version::new(1, u64::MAX, 0)));
        assert!(!r.contains(&semver::Version::new(1, u64::MAX - 1, 7)));
        assert!(!r.contains(&semver::Version::new(0, 0, 0)));
    }

    /// Real data (needs ../shared/catalogs): every skipRange of the shared catalogs is within the
    /// limits (lines `skipRange: ...`, read without a YAML parser to keep the test quick).
    #[test]
    fn real_catalogs_skip_ranges_are_within_the_limits() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/catalogs");
        let mut seen = 0;
        for catalog in
            std::fs::read_dir(root).unwrap_or_else(|e| panic!("real catalogs {root} must exist: {e}"))
        {
            let catalog = catalog.expect("a catalog entry").path();
            if !catalog.is_dir() {
                continue;
            }
            for package in std::fs::read_dir(&catalog).expect("a catalog directory") {
                let file = package.expect("a package entry").path().join("catalog.yaml");
                let Ok(text) = std::fs::read_to_string(&file) else {
                    continue;
                };
                for line in text.lines() {
                    let Some((_, value)) = line.split_once("skipRange: ") else {
                        continue;
                    };
                    let range = value.trim().trim_matches(|c| c == '\'' || c == '"');
                    seen += 1;
                    assert!(
                        !matches!(
                            SkipRange::parse(range),
                            Err(VersionError::RangeTooLong { .. } | VersionError::RangeTooManyTerms { .. })
                        ),
                        "{}: {range}",
                        file.display()
                    );
                }
            }
        }
        assert!(seen >= 600, "{seen} skipRanges");
    }
}

/// Property tests: any text is a range or an error, never a panic; generated ranges mean what
/// they say and print back to text that parses to the same range.
#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;
    use crate::version::generated::{holds, operator, range_text};

    fn version() -> impl Strategy<Value = semver::Version> {
        (0u64..4, 0u64..4, 0u64..4).prop_map(|(a, b, c)| semver::Version::new(a, b, c))
    }

    proptest! {
        #[test]
        fn any_text_parses_or_errs_never_panics(text in "\\PC{0,40}") {
            let _ = SkipRange::parse(&text);
        }

        #[test]
        fn range_like_text_parses_or_errs_never_panics(
            text in "[0-9xX.|<>=! -]{0,30}",
            candidate in version(),
        ) {
            if let Ok(range) = SkipRange::parse(&text) {
                let again = SkipRange::parse(&range.to_string()).expect("a printed range parses");
                prop_assert_eq!(range.contains(&candidate), again.contains(&candidate));
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
            let text = range_text(&groups, " ");
            let range = SkipRange::parse(&text).expect("a generated range parses");
            let expected = holds(&groups, |bound| candidate.cmp(bound));
            prop_assert_eq!(range.contains(&candidate), expected, "{} vs {}", text, candidate);
        }
    }
}
