//! Version-range conformance tables: every triple of Masterminds' TestConstraintCheck,
//! TestConstraintsCheck and TestNewConstraint, blang's TestParseRange, and every row of the OLM v1
//! docs' range tables (each row's two spellings must agree on a grid of versions).

use olmv1::version::{LooseVersion, SkipRange, VersionRange, VersionRelease, check_one_constraint};

fn loose(v: &str) -> LooseVersion {
    LooseVersion::parse(v).unwrap_or_else(|| panic!("test version {v:?} does not parse"))
}

/// Masterminds TestConstraintCheck: `parseConstraint` + `check`, prereleases allowed only when the
/// constraint names one.
const CONSTRAINT_CHECK: &[(&str, &str, bool)] = &[
    ("=2.0.0", "1.2.3", false),
    ("=2.0.0", "2.0.0", true),
    ("=2.0", "1.2.3", false),
    ("=2.0", "2.0.0", true),
    ("=2.0", "2.0.1", true),
    ("4.1", "4.1.0", true),
    ("!=4.1.0", "4.1.0", false),
    ("!=4.1.0", "4.1.1", true),
    ("!=4.1", "4.1.0", false),
    ("!=4.1", "4.1.1", false),
    ("!=4.1", "5.1.0-alpha.1", false),
    ("!=4.1.0", "5.1.0-alpha.1", false),
    ("!=4.1-alpha", "4.1.0", true),
    ("!=4.1", "5.1.0", true),
    ("<11", "0.1.0", true),
    ("<11", "11.1.0", false),
    ("<1.1", "0.1.0", true),
    ("<1.1", "1.1.0", false),
    ("<1.1", "1.1.1", false),
    ("<=11", "1.2.3", true),
    ("<=11", "12.2.3", false),
    ("<=11", "11.2.3", true),
    ("<=1.1", "1.2.3", false),
    ("<=1.1", "0.1.0", true),
    ("<=1.1", "1.1.0", true),
    ("<=1.1", "1.1.1", true),
    (">1.1", "4.1.0", true),
    (">1.1", "1.1.0", false),
    (">0", "0", false),
    (">0", "1", true),
    (">0", "0.0.1-alpha", false),
    (">0.0", "0.0.1-alpha", false),
    (">0-0", "0.0.1-alpha", false),
    (">0.0-0", "0.0.1-alpha", false),
    (">0", "0.0.0-alpha", false),
    (">0-0", "0.0.0-alpha", false),
    (">0.0.0-0", "0.0.0-alpha", true),
    (">1.2.3-alpha.1", "1.2.3-alpha.2", true),
    (">1.2.3-alpha.1", "1.3.3-alpha.2", true),
    (">11", "11.1.0", false),
    (">11.1", "11.1.0", false),
    (">11.1", "11.1.1", false),
    (">11.1", "11.2.1", true),
    (">=11", "11.1.2", true),
    (">=11.1", "11.1.2", true),
    (">=11.1", "11.0.2", false),
    (">=1.1", "4.1.0", true),
    (">=1.1", "1.1.0", true),
    (">=1.1", "0.0.9", false),
    (">=0", "0.0.1-alpha", false),
    (">=0.0", "0.0.1-alpha", false),
    (">=0-0", "0.0.1-alpha", true),
    (">=0.0-0", "0.0.1-alpha", true),
    (">=0", "0.0.0-alpha", false),
    (">=0-0", "0.0.0-alpha", true),
    (">=0.0.0-0", "0.0.0-alpha", true),
    (">=0.0.0-0", "1.2.3", true),
    (">=0.0.0-0", "3.4.5-beta.1", true),
    ("<0", "0.0.0-alpha", false),
    ("<0-z", "0.0.0-alpha", true),
    (">=0", "0", true),
    ("=0", "1", false),
    ("*", "1", true),
    ("*", "4.5.6", true),
    ("*", "1.2.3-alpha.1", false),
    ("*-0", "1.2.3-alpha.1", true),
    ("2.*", "1", false),
    ("2.*", "3.4.5", false),
    ("2.*", "2.1.1", true),
    ("2.1.*", "2.1.1", true),
    ("2.1.*", "2.2.1", false),
    ("", "1", true),
    ("", "4.5.6", true),
    ("", "1.2.3-alpha.1", false),
    ("2", "1", false),
    ("2", "3.4.5", false),
    ("2", "2.1.1", true),
    ("2.1", "2.1.1", true),
    ("2.1", "2.2.1", false),
    ("~1.2.3", "1.2.4", true),
    ("~1.2.3", "1.3.4", false),
    ("~1.2", "1.2.4", true),
    ("~1.2", "1.3.4", false),
    ("~1", "1.2.4", true),
    ("~1", "2.3.4", false),
    ("~0.2.3", "0.2.5", true),
    ("~0.2.3", "0.3.5", false),
    ("~1.2.3-beta.2", "1.2.3-beta.4", true),
    ("~1.2.3-beta.2", "1.2.4-beta.2", true),
    ("~1.2.3-beta.2", "1.3.4-beta.2", false),
    ("^1.2.3", "1.8.9", true),
    ("^1.2.3", "2.8.9", false),
    ("^1.2.3", "1.2.1", false),
    ("^1.1.0", "2.1.0", false),
    ("^1.2.0", "2.2.1", false),
    ("^1.2.0", "1.2.1-alpha.1", false),
    ("^1.2.0-alpha.0", "1.2.1-alpha.1", true),
    ("^1.2.0-alpha.0", "1.2.1-alpha.0", true),
    ("^1.2.0-alpha.2", "1.2.0-alpha.1", false),
    ("^1.2", "1.8.9", true),
    ("^1.2", "2.8.9", false),
    ("^1", "1.8.9", true),
    ("^1", "2.8.9", false),
    ("^0.2.3", "0.2.5", true),
    ("^0.2.3", "0.5.6", false),
    ("^0.2", "0.2.5", true),
    ("^0.2", "0.5.6", false),
    ("^0.0.3", "0.0.3", true),
    ("^0.0.3", "0.0.4", false),
    ("^0.0", "0.0.3", true),
    ("^0.0", "0.1.4", false),
    ("^0.0", "1.0.4", false),
    ("^0", "0.2.3", true),
    ("^0", "1.1.4", false),
    ("^0.2.3-beta.2", "0.2.3-beta.4", true),
    ("^0.2.3-beta.2", "0.2.4-beta.2", true),
    ("^0.2.3-beta.2", "0.3.4-beta.2", false),
    ("^0.2.3-beta.2", "0.2.3-beta.2", true),
];

#[test]
fn masterminds_constraint_check_table() {
    assert_eq!(CONSTRAINT_CHECK.len(), 118);
    for &(constraint, version, want) in CONSTRAINT_CHECK {
        let got = check_one_constraint(constraint, &loose(version))
            .unwrap_or_else(|e| panic!("{constraint:?} does not parse: {e}"));
        assert_eq!(got, want, "constraint {constraint:?} version {version:?}");
    }
}

/// Masterminds TestConstraintsCheck rows beyond TestConstraintCheck (`NewConstraint` + `Check`,
/// the path OLM v1 uses), with each separator/whitespace spelling the reference merges.
const CONSTRAINTS_CHECK: &[(&str, &str, bool)] = &[
    ("~0.0.0", "1.2.3", true),
    ("0.x.x", "1.2.3", false),
    ("0.0.x", "1.2.3", false),
    ("0.0.0", "1.2.3", false),
    ("^0.0.0", "1.2.3", false),
    ("= 2.0", "1.2.3", false),
    ("= 2.0", "2.0.0", true),
    ("4.1.x", "4.1.3", true),
    ("1.x", "1.4", true),
    ("!=4.1-alpha", "4.1.0-alpha", false),
    ("!=4.1-alpha", "4.1.1-alpha", false),
    ("!=4.1-alpha", "4.1.0", true),
    ("!=4.x", "5.1.0", true),
    ("!=4.x", "4.1.0", false),
    ("!=4.1.x", "4.2.0", true),
    ("!=4.2.x", "4.2.3", false),
    ("<1.x", "1.1.1", false),
    ("<1.x", "0.1.1", true),
    ("<1.x", "2.0.0", false),
    ("<1.1.x", "1.2.1", false),
    ("<1.1.x", "1.1.500", false),
    ("<1.1.x", "1.0.500", true),
    ("<1.2.x", "1.1.1", true),
    (">=1.1", "4.1.0-beta", false),
    ("<=1.1", "0.1.0-alpha", false),
    ("<=1.1-a", "0.1.0-alpha", true),
    ("<=1.x", "1.1.0", true),
    ("<=2.x", "3.0.0", false),
    ("<=1.1.x", "1.2.500", false),
    ("<=4.5", "3.4.0", true),
    ("<=4.5", "3.7.0", true),
    ("<=4.5", "4.6.3", false),
    (">1.1, <2", "1.1.1", false),
    (">1.1 <2", "1.1.1", false),
    (">1.1, <2", "1.2.1", true),
    (">1.1 <2", "1.2.1", true),
    (">1.1, <3", "4.3.2", false),
    (">=1.1, <2, !=1.2.3", "1.2.3", false),
    (">=1.1 <2 !=1.2.3", "1.2.3", false),
    (">=1.1, <2, !=1.2.3 || > 3", "4.1.2", true),
    (">=1.1 <2 !=1.2.3 || > 3", "4.1.2", true),
    (">=1.1, <2, !=1.2.3 || > 3", "3.1.2", false),
    (">=1.1 <2 !=1.2.3 || > 3", "3.1.2", false),
    (">=1.1, <2, !=1.2.3 || > 3", "3.0.0", false),
    (">=1.1 <2 !=1.2.3 || > 3", "3.0.0", false),
    (">=1.1, <2, !=1.2.3 || > 3", "1.2.3", false),
    (">=1.1 <2 !=1.2.3 || > 3", "1.2.3", false),
    (">=1.1, <2, !=1.2.3 || >= 3", "3.0.0", true),
    (">=1.1 <2 !=1.2.3 || >= 3", "3.0.0", true),
    (">= 1.0.0  <= 2.0.0-beta", "1.0.1-beta", true),
    (">= 1.0.0  <= 2.0.0-beta", "1.0.1", true),
    (">= 1.0.0  <= 2.0.0-beta", "3.0.0", false),
    (">= 1.0.0  <= 2.0.0-beta || > 3", "1.0.1-beta", true),
    (">= 1.0.0  <= 2.0.0-beta || > 3", "3.0.1-beta", false),
    (">= 1.0.0  <= 2.0.0-beta != 1.0.1 || > 3", "1.0.1-beta", true),
    (
        ">= 1.0.0  <= 2.0.0-beta != 1.0.1-beta || > 3",
        "1.0.1-beta",
        false,
    ),
    (">= 1.0.0-0  <= 2.0.0", "1.0.1-beta", true),
    ("1.1 - 2", "1.1.1", true),
    ("1.5.0 - 4.5", "3.7.0", true),
    ("1.1-3", "4.3.2", false),
    ("^1.1", "1.1.1", true),
    ("^1.1", "4.3.2", false),
    ("^1.x", "1.1.1", true),
    ("^1.x", "2.1.1", false),
    ("^1.x", "1.1.1-beta1", false),
    ("^2.x", "1.1.1", false),
    ("^1.1.2-alpha", "1.2.1-beta1", true),
    ("^1.2.x-alpha", "1.1.1-beta1", false),
    ("^0.0.1", "0.0.1", true),
    ("^0.0.1", "0.3.1", false),
    ("~*", "2.1.1", true),
    ("~1", "2.1.1", false),
    ("~1.x", "2.1.1", false),
    ("~1", "1.3.5", true),
    ("~1.x", "1.3.5", true),
    ("~1", "1.4", true),
    ("~1.x", "1.4", true),
    ("~1.1", "1.1.1", true),
    ("~1.1", "1.1.1-alpha", false),
    ("~1.1", "1.2.3", false),
    ("~1.1-alpha", "1.1.1-beta", true),
    ("~1.1.1-beta", "1.1.1-alpha", false),
    ("~1.1.1-beta", "1.1.1", true),
    ("~1.2.3", "1.2.5", true),
    ("~1.2.3", "1.2.2", false),
    ("~1.2.3", "1.3.2", false),
    ("~1.3", "2.4.5", false),
    ("1.0.0 - 2.0.0 <=2.0.0", "1.5.0", true),
    ("1.0.0 - 2.0.0, <=2.0.0", "1.5.0", true),
];

#[test]
fn masterminds_constraints_check_table() {
    for &(range, version, want) in CONSTRAINTS_CHECK {
        let r = VersionRange::parse(range).unwrap_or_else(|e| panic!("{range:?} does not parse: {e}"));
        assert_eq!(
            r.matches_loose(&loose(version)),
            want,
            "range {range:?} version {version:?}"
        );
    }
    // The rows TestConstraintCheck shares with TestConstraintsCheck behave the same through
    // NewConstraint (all but the empty constraint, which NewConstraint rejects).
    for &(range, version, want) in CONSTRAINT_CHECK.iter().filter(|(c, _, _)| !c.is_empty()) {
        let r = VersionRange::parse(range).unwrap_or_else(|e| panic!("{range:?} does not parse: {e}"));
        assert_eq!(
            r.matches_loose(&loose(version)),
            want,
            "range {range:?} version {version:?}"
        );
    }
}

#[test]
fn masterminds_new_constraint_table() {
    let ok = [
        ">= 1.1",
        ">40.50.60, < 50.70",
        "v2.3.5-20161202202307-sha.e8fc5e5",
        "v1.2.3-0abc",
        ">= 1.2.3 < 2.0 || => 3.0 < 4",
        "3 - 4 || => 3.0, < 4",
        "12.3.34 ~1.2.3",
        "1.0.0 - 2.0.0, <=2.0.0",
    ];
    for r in ok {
        assert!(VersionRange::parse(r).is_ok(), "{r:?} should parse");
    }
    for r in [
        "v1.2.3-beta.01",
        ">= bar",
        "BAR >= 1.2.3",
        "12.3.4.1234",
        "12.3.34~ 1.2.3",
    ] {
        assert!(VersionRange::parse(r).is_err(), "{r:?} should not parse");
    }
    assert_eq!(
        VersionRange::parse(">= bar").unwrap_err().to_string(),
        "improper constraint: \">= bar\""
    );
}

/// blang TestParseRange, the skipRange semantics.
const BLANG_PARSE_RANGE: &[(&str, &[(&str, bool)])] = &[
    (">1.2.3", &[("1.2.2", false), ("1.2.3", false), ("1.2.4", true)]),
    (">=1.2.3", &[("1.2.3", true), ("1.2.4", true), ("1.2.2", false)]),
    ("<1.2.3", &[("1.2.2", true), ("1.2.3", false), ("1.2.4", false)]),
    ("<=1.2.3", &[("1.2.2", true), ("1.2.3", true), ("1.2.4", false)]),
    ("1.2.3", &[("1.2.2", false), ("1.2.3", true), ("1.2.4", false)]),
    ("=1.2.3", &[("1.2.2", false), ("1.2.3", true), ("1.2.4", false)]),
    ("==1.2.3", &[("1.2.2", false), ("1.2.3", true), ("1.2.4", false)]),
    ("!=1.2.3", &[("1.2.2", true), ("1.2.3", false), ("1.2.4", true)]),
    ("!1.2.3", &[("1.2.2", true), ("1.2.3", false), ("1.2.4", true)]),
    (
        ">1.2.2 <1.2.4",
        &[("1.2.2", false), ("1.2.3", true), ("1.2.4", false)],
    ),
    (
        "<1.2.2 <1.2.4",
        &[
            ("1.2.1", true),
            ("1.2.2", false),
            ("1.2.3", false),
            ("1.2.4", false),
        ],
    ),
    (
        ">1.2.2 <1.2.5 !=1.2.4",
        &[
            ("1.2.2", false),
            ("1.2.3", true),
            ("1.2.4", false),
            ("1.2.5", false),
        ],
    ),
    (
        ">1.2.2 <1.2.5 !1.2.4",
        &[
            ("1.2.2", false),
            ("1.2.3", true),
            ("1.2.4", false),
            ("1.2.5", false),
        ],
    ),
    (
        ">1.2.2 || <1.2.4",
        &[("1.2.2", true), ("1.2.3", true), ("1.2.4", true)],
    ),
    (
        "<1.2.2 || >1.2.4",
        &[("1.2.2", false), ("1.2.3", false), ("1.2.4", false)],
    ),
    (
        ">1.x",
        &[
            ("0.1.9", false),
            ("1.2.6", false),
            ("1.9.0", false),
            ("2.0.0", true),
        ],
    ),
    (">1.2.x", &[("1.1.9", false), ("1.2.6", false), ("1.3.0", true)]),
    (
        ">1.2.2 <1.2.4 || >=2.0.0",
        &[
            ("1.2.2", false),
            ("1.2.3", true),
            ("1.2.4", false),
            ("2.0.0", true),
            ("2.0.1", true),
        ],
    ),
    (
        "1.x || >=2.0.x <2.2.x",
        &[
            ("0.9.2", false),
            ("1.2.2", true),
            ("2.0.0", true),
            ("2.1.8", true),
            ("2.2.0", false),
        ],
    ),
    (
        ">1.2.2 <1.2.4 || >=2.0.0 <3.0.0",
        &[
            ("1.2.2", false),
            ("1.2.3", true),
            ("1.2.4", false),
            ("2.0.0", true),
            ("2.0.1", true),
            ("2.9.9", true),
            ("3.0.0", false),
        ],
    ),
];

#[test]
fn blang_parse_range_table() {
    let mut triples = 0;
    for &(range, cases) in BLANG_PARSE_RANGE {
        let r = SkipRange::parse(range).unwrap_or_else(|e| panic!("{range:?} does not parse: {e}"));
        for &(version, want) in cases {
            let v = semver::Version::parse(version).unwrap();
            assert_eq!(r.contains(&v), want, "skipRange {range:?} version {version:?}");
            triples += 1;
        }
    }
    assert_eq!(triples, 72);
    for bad in [
        ">>1.2.3",
        "1.0",
        "string",
        "",
        "fo.ob.ar.x",
        "-1.0.0",
        "<==1.0.0",
        "<<1.0.0",
    ] {
        assert!(SkipRange::parse(bad).is_err(), "{bad:?} should not parse");
    }
    // Build metadata never takes part; prereleases are ordinary versions.
    let r = SkipRange::parse(">=1.0.0 <2.0.0").unwrap();
    assert!(r.contains(&semver::Version::parse("1.5.0+build").unwrap()));
    assert!(r.contains(&semver::Version::parse("1.5.0-rc.1").unwrap()));
    assert!(!r.contains(&semver::Version::parse("1.0.0-rc.1").unwrap()));
    assert!(
        SkipRange::parse("<=0.0.1")
            .unwrap()
            .contains(&semver::Version::parse("0.0.1").unwrap())
    );
}

/// Every version of a grid (with prereleases): two ranges agree on all of them.
fn assert_equivalent(a: &str, b: &str) {
    let ra = VersionRange::parse(a).unwrap_or_else(|e| panic!("{a:?}: {e}"));
    let rb = VersionRange::parse(b).unwrap_or_else(|e| panic!("{b:?}: {e}"));
    for major in 0..5u64 {
        for minor in 0..15u64 {
            for patch in 0..6u64 {
                for pre in ["", "alpha.1"] {
                    let v = LooseVersion {
                        major,
                        minor,
                        patch,
                        pre: pre.to_string(),
                    };
                    assert_eq!(
                        ra.matches_loose(&v),
                        rb.matches_loose(&v),
                        "{a:?} vs {b:?} at {v}"
                    );
                }
            }
        }
    }
}

#[test]
fn olm_docs_range_tables() {
    // Comparisons (docs example and the basic operators).
    assert_equivalent(">=1.11, <1.13", ">=1.11.0 <1.13.0");
    assert_equivalent("=1.2.3", "1.2.3");
    assert_equivalent("!=1.2.3", "<1.2.3 || >1.2.3");
    assert_equivalent(">1.2.3", ">=1.2.4");
    assert_equivalent("<1.2.3", "<=1.2.2");
    // Wildcards.
    assert_equivalent("1.11.x", ">=1.11.0, <1.12.0");
    assert_equivalent(">=1.12.X", ">=1.12.0");
    assert_equivalent("<=2.x", "<3");
    assert_equivalent("*", ">=0.0.0");
    // Tilde.
    assert_equivalent("~1.11.0", ">=1.11.0, <1.12.0");
    assert_equivalent("~1", ">=1, <2");
    assert_equivalent("~1.12", ">=1.12, <1.13");
    assert_equivalent("~1.12.x", ">=1.12.0, <1.13.0");
    assert_equivalent("~1.x", ">=1, <2");
    // Caret.
    assert_equivalent("^0", ">=0.0.0, <1.0.0");
    assert_equivalent("^0.0", ">=0.0.0, <0.1.0");
    assert_equivalent("^0.0.3", ">=0.0.3, <0.0.4");
    assert_equivalent("^0.2", ">=0.2.0, <0.3.0");
    assert_equivalent("^0.2.3", ">=0.2.3, <0.3.0");
    assert_equivalent("^1.2.x", ">= 1.2.0, < 2.0.0");
    assert_equivalent("^1.2.3", ">= 1.2.3, < 2.0.0");
    assert_equivalent("^2.x", ">= 2.0.0, < 3");
    assert_equivalent("^2.3", ">= 2.3, < 3");
    // Admission-test spellings accepted by the CRD parse here too.
    for r in [
        "1.2.3-alpha.1+metadata",
        ">=v1.2.3",
        ">= v1.2.3",
        "=>1.2.3",
        "=<1.2.3",
        "~>1.2.3",
        "1.x",
        "1.X",
        "1.*",
        ">=1.2.3,<2.3.4",
        "<1.2.3||>2.3.4",
        "<1.2.3-abc+def >2.3.4-ghi+jkl",
    ] {
        assert!(VersionRange::parse(r).is_ok(), "{r:?}");
    }
}

#[test]
fn upstream_new_version_range_cases() {
    // compare_test.go TestNewVersionRange: build metadata ignored on both sides.
    let r = VersionRange::parse("1.0.0+1").unwrap();
    for v in ["1.0.0", "1.0.0+2", "1.0.0+1"] {
        assert!(r.matches(&semver::Version::parse(v).unwrap()), "{v}");
    }
    let r = VersionRange::parse("1.0.0").unwrap();
    for v in ["1.0.0", "1.0.0+1"] {
        assert!(r.matches(&semver::Version::parse(v).unwrap()), "{v}");
    }
    assert!(
        !VersionRange::parse(">=2.0.0")
            .unwrap()
            .matches(&semver::Version::parse("1.0.0").unwrap())
    );
    assert_eq!(
        VersionRange::parse("not-a-valid-version")
            .unwrap_err()
            .to_string(),
        "improper constraint: \"not-a-valid-version\""
    );
}

#[test]
fn upstream_version_release_cases() {
    // bundle_test.go TestGetVersionAndRelease / compare_test.go TestByVersionAndRelease.
    let vr = VersionRelease::parse_legacy("1.0.0-pre+1.alpha.2").unwrap();
    assert_eq!(
        (vr.version.to_string().as_str(), vr.release.as_str()),
        ("1.0.0-pre", "1.alpha.2")
    );
    let vr = VersionRelease::parse_legacy("1.0.0+001").unwrap();
    assert_eq!(
        (vr.version.to_string().as_str(), vr.release.as_str()),
        ("1.0.0+001", "")
    );
    assert!(VersionRelease::parse_legacy("").is_err());
    assert!(VersionRelease::parse_legacy("abc").is_err());
    let vr = VersionRelease::parse_legacy("1.0.0+2").unwrap();
    assert_eq!(
        (vr.version.to_string().as_str(), vr.release.as_str()),
        ("1.0.0", "2")
    );
    assert_eq!(vr.status_version(), "1.0.0+2");
    let explicit = VersionRelease::parse_explicit("1.0.0", "2").unwrap();
    assert!(explicit.compare(&vr).is_eq());
    // A release ranks above none; +2 above +1; then by version.
    let mut list: Vec<VersionRelease> = ["0.0.1", "1.0.0-alpha+1", "1.0.0", "1.0.0-alpha+2"]
        .iter()
        .map(|s| VersionRelease::parse_legacy(s).unwrap())
        .collect();
    list.sort_by(|a, b| b.compare(a));
    let order: Vec<String> = list.iter().map(|v| v.status_version()).collect();
    assert_eq!(order, ["1.0.0", "1.0.0-alpha+2", "1.0.0-alpha+1", "0.0.1"]);
    assert!(
        VersionRelease::parse_legacy("2.0.0+1")
            .unwrap()
            .compare(&VersionRelease::parse_legacy("2.0.0").unwrap())
            .is_gt()
    );
}
