//! Kubernetes label selectors over ClusterCatalog labels (`metav1.LabelSelectorAsSelector`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A validated label selector. No selector, or an empty one, selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatalogSelector {
    requirements: Vec<Requirement>,
}

impl CatalogSelector {
    /// Validates a selector as Kubernetes does; the error text is Kubernetes' (e.g.
    /// `"bad" is not a valid label selector operator`).
    pub fn new(selector: Option<&LabelSelector>) -> Result<CatalogSelector, String> {
        let Some(selector) = selector else {
            return Ok(CatalogSelector::default());
        };
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            validate_key(key)?;
            validate_value(value)?;
            requirements.push(Requirement::In(key.clone(), vec![value.clone()]));
        }
        for expr in selector.match_expressions.iter().flatten() {
            let values = expr.values.clone().unwrap_or_default();
            let requirement = match expr.operator.as_str() {
                "In" => Requirement::In(expr.key.clone(), values.clone()),
                "NotIn" => Requirement::NotIn(expr.key.clone(), values.clone()),
                "Exists" => Requirement::Exists(expr.key.clone()),
                "DoesNotExist" => Requirement::DoesNotExist(expr.key.clone()),
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            validate_key(&expr.key)?;
            match &requirement {
                Requirement::In(..) | Requirement::NotIn(..) if values.is_empty() => {
                    return Err("values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty".to_string());
                }
                Requirement::Exists(_) | Requirement::DoesNotExist(_) if !values.is_empty() => {
                    return Err(format!(
                        "values: Invalid value: {values:?}: values set must be empty for exists and does not exist"
                    ));
                }
                _ => {}
            }
            for v in &values {
                validate_value(v)?;
            }
            requirements.push(requirement);
        }
        Ok(CatalogSelector { requirements })
    }

    /// Whether a catalog with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

const NAME_MESSAGE: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// A label key: `[prefix/]name`, as Kubernetes' `IsQualifiedName`.
fn validate_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && !is_dns1123_subdomain(prefix)
    {
        return Err(format!(
            "key: Invalid value: {key:?}: prefix part must be a valid DNS-1123 subdomain"
        ));
    }
    if !is_qualified_name_part(name) || name.contains('/') {
        return Err(format!("key: Invalid value: {key:?}: {NAME_MESSAGE}"));
    }
    Ok(())
}

/// A label value: empty, or at most 63 characters like a name part.
fn validate_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_qualified_name_part(value) {
        return Ok(());
    }
    Err(format!(
        "values[0][{value}]: Invalid value: {value:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    ))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn match_labels_and_expressions() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("olm.operatorframework.io/metadata.name", "a")])),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "NotIn".into(),
                    values: Some(vec!["dev".into()]),
                },
                LabelSelectorRequirement {
                    key: "gone".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        };
        let s = CatalogSelector::new(Some(&sel)).unwrap();
        assert!(s.matches(&labels(&[("olm.operatorframework.io/metadata.name", "a")])));
        assert!(!s.matches(&labels(&[
            ("olm.operatorframework.io/metadata.name", "a"),
            ("tier", "dev")
        ])));
        assert!(!s.matches(&labels(&[
            ("olm.operatorframework.io/metadata.name", "a"),
            ("gone", "")
        ])));
        assert!(CatalogSelector::new(None).unwrap().matches(&labels(&[])));
    }

    #[test]
    fn invalid_operator_is_upstreams_error() {
        let sel = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "k".into(),
                operator: "bad".into(),
                values: Some(vec!["v".into()]),
            }]),
        };
        assert_eq!(
            CatalogSelector::new(Some(&sel)).unwrap_err(),
            "\"bad\" is not a valid label selector operator"
        );
    }
}
