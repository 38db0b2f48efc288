//! Object names exactly as upstream builds them: `util.ObjectNameForBaseAndSuffix` and
//! `hash.DeepHashObject` (base36 of the SHA-224 of Go's JSON encoding, trailing newline included).

use sha2::{Digest, Sha224};

use crate::bundle::csv::{PermissionRule, StrategyPermissions};

/// Kubernetes' DNS-1123 label length, which upstream uses as its name budget.
pub const MAX_NAME_LENGTH: usize = 63;

/// `base-suffix`, with `base` cut so that `len(base) + len(suffix) <= 63`.
///
/// Mirrors upstream to the byte, including its arithmetic: when `len(base) + len(suffix)` is
/// exactly 63 the result is 64 characters long.
pub fn object_name_for_base_and_suffix(base: &str, suffix: &str) -> String {
    if base.len() + suffix.len() > MAX_NAME_LENGTH {
        let keep = MAX_NAME_LENGTH.saturating_sub(suffix.len() + 1);
        // Upstream slices bytes; names are ASCII, but never split a UTF-8 character.
        let mut cut = keep.min(base.len());
        while !base.is_char_boundary(cut) {
            cut -= 1;
        }
        return format!("{}-{suffix}", &base[..cut]);
    }
    format!("{base}-{suffix}")
}

/// The name of the Role/ClusterRole (and binding) for one CSV permission:
/// `UniqueName("<csvName>-<serviceAccount>", permission)`.
pub fn permission_object_name(base: &str, permission: &StrategyPermissions) -> String {
    object_name_for_base_and_suffix(base, &deep_hash(&go_json_permission(permission)))
}

/// base36 of SHA-224 over `encoded` followed by a newline (Go's `json.Encoder` appends one).
pub fn deep_hash(encoded: &str) -> String {
    let mut hasher = Sha224::new();
    hasher.update(encoded.as_bytes());
    hasher.update(b"\n");
    base36(&hasher.finalize())
}

/// Big-endian bytes as a base-36 number, lower case, no leading zeros (Go's `big.Int.Text(36)`).
fn base36(bytes: &[u8]) -> String {
    let mut digits: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
    if digits.is_empty() {
        return "0".to_string();
    }
    let mut out = Vec::new();
    while !digits.is_empty() {
        let mut remainder: u32 = 0;
        let mut quotient = Vec::with_capacity(digits.len());
        for &d in &digits {
            let acc = remainder * 256 + u32::from(d);
            let q = acc / 36;
            remainder = acc % 36;
            if !(quotient.is_empty() && q == 0) {
                quotient.push(q as u8);
            }
        }
        out.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[remainder as usize]);
        digits = quotient;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// Go's `json.Marshal` of `StrategyDeploymentPermissions`: struct field order, `rules` and
/// `verbs` not omitted (so `null` when absent), the other rule lists omitted when empty.
pub fn go_json_permission(permission: &StrategyPermissions) -> String {
    let mut out = String::from("{\"serviceAccountName\":");
    go_json_string(&mut out, &permission.service_account_name);
    out.push_str(",\"rules\":");
    match &permission.rules {
        None => out.push_str("null"),
        Some(rules) => {
            out.push('[');
            for (i, rule) in rules.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json_rule(&mut out, rule);
            }
            out.push(']');
        }
    }
    out.push('}');
    out
}

fn go_json_rule(out: &mut String, rule: &PermissionRule) {
    out.push_str("{\"verbs\":");
    match &rule.verbs {
        None => out.push_str("null"),
        Some(verbs) => go_json_string_list(out, verbs),
    }
    let optional = [
        ("apiGroups", &rule.api_groups),
        ("resources", &rule.resources),
        ("resourceNames", &rule.resource_names),
        ("nonResourceURLs", &rule.non_resource_urls),
    ];
    for (key, list) in optional {
        if let Some(list) = list.as_ref().filter(|l| !l.is_empty()) {
            out.push_str(",\"");
            out.push_str(key);
            out.push_str("\":");
            go_json_string_list(out, list);
        }
    }
    out.push('}');
}

fn go_json_string_list(out: &mut String, list: &[String]) {
    out.push('[');
    for (i, s) in list.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        go_json_string(out, s);
    }
    out.push(']');
}

/// A JSON string as Go's encoder writes it with HTML escaping on (the default).
fn go_json_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => {
                let b = c as u32;
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 0xf) as usize] as char);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    // Vectors from upstream's internal/shared/util/hash/hash_test.go.
    #[test]
    fn deep_hash_matches_upstream_vectors() {
        assert_eq!(deep_hash("\"a\""), "1lu1qv1451mq7gv9upu1cx8ffffi07rel5xvbvvc44dh");
        assert_eq!(deep_hash("\"b\""), "1ija85ah4gd0beltpfhszipkxfyqqxhp94tf2mjfgq61");
        assert_eq!(deep_hash("null"), "2im0kl1kwvzn46sr4cdtkvmdzrlurvj51xdzhwdht8l0");
        assert_eq!(deep_hash("{}"), "16jfjhihxbzhfhs1k5mimq740kvioi98pfbea9q6qtf9");
        assert_eq!(
            deep_hash(r#"{"Str":"foobar","Num":22,"Obj":{"Foo":"bar"},"Arr":[0,1],"B":true,"N":null}"#),
            "gta1bt5sybll5qjqxdiekmjm7py93glrinmnrfb31fj"
        );
    }

    #[test]
    fn names_are_cut_to_the_upstream_budget() {
        assert_eq!(object_name_for_base_and_suffix("dep", "service"), "dep-service");
        let long = "a".repeat(100);
        let name = object_name_for_base_and_suffix(&long, "service");
        assert_eq!(name.len(), 63);
        assert!(name.ends_with("a-service"));
        // Upstream's off-by-one, kept so names match: 56 + 7 = 63 is not cut, giving 64.
        assert_eq!(
            object_name_for_base_and_suffix(&"b".repeat(56), "service").len(),
            64
        );
    }

    #[test]
    fn permissions_encode_like_go() {
        let permission = StrategyPermissions {
            service_account_name: "sa".into(),
            rules: Some(vec![
                PermissionRule {
                    verbs: None,
                    ..Default::default()
                },
                PermissionRule {
                    verbs: Some(vec!["get".into()]),
                    api_groups: Some(vec![String::new()]),
                    resources: Some(vec![]),
                    non_resource_urls: Some(vec!["/a<b>&".into()]),
                    ..Default::default()
                },
            ]),
        };
        assert_eq!(
            go_json_permission(&permission),
            r#"{"serviceAccountName":"sa","rules":[{"verbs":null},{"verbs":["get"],"apiGroups":[""],"nonResourceURLs":["/a\u003cb\u003e\u0026"]}]}"#
        );
        assert_eq!(
            go_json_permission(&StrategyPermissions::default()),
            r#"{"serviceAccountName":"","rules":null}"#
        );
    }
}
