//! Conditions as upstream sets them: observedGeneration on each, messages cut at 32 KiB, and
//! lastTransitionTime kept while the status does not change.

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};
use olmv1_api::v1::conditions::{MAX_CONDITION_MESSAGE_LEN, TRUNCATED_MESSAGE_SUFFIX};

/// Cuts a message to the API's limit, on a character boundary, marking the cut.
pub fn truncate_message(message: &str) -> String {
    if message.len() <= MAX_CONDITION_MESSAGE_LEN {
        return message.to_string();
    }
    let mut end = MAX_CONDITION_MESSAGE_LEN - TRUNCATED_MESSAGE_SUFFIX.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{TRUNCATED_MESSAGE_SUFFIX}", &message[..end])
}

/// Sets a condition in place. An existing condition with the same status keeps its
/// lastTransitionTime, so that writing the same status again changes nothing.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
) {
    let status = status.as_str().to_string();
    let message = truncate_message(message);
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            if existing.status != status {
                existing.last_transition_time = Time(Timestamp::now());
                existing.status = status;
            }
            existing.reason = reason.to_string();
            existing.message = message;
            existing.observed_generation = observed_generation;
        }
        None => conditions.push(Condition {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message,
            observed_generation,
            last_transition_time: Time(Timestamp::now()),
        }),
    }
}

/// The value of a condition's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    /// As the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }

    /// From a boolean.
    pub fn from_bool(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }
}

/// Strips the network noise upstream strips from messages (`read tcp 1.2.3.4:5->6.7.8.9:10: `),
/// so that a retried error does not rewrite status on every attempt.
pub fn sanitize_network_error(message: &str) -> String {
    static NOISE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(read|write) (tcp|udp) [^\s]+->[^\s]+: ").expect("a valid regex")
    });
    NOISE.replace_all(message, "").into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_with_the_upstream_suffix() {
        let long = "é".repeat(MAX_CONDITION_MESSAGE_LEN);
        let cut = truncate_message(&long);
        assert!(cut.len() <= MAX_CONDITION_MESSAGE_LEN);
        assert!(cut.ends_with(TRUNCATED_MESSAGE_SUFFIX));
        assert_eq!(truncate_message("short"), "short");
    }

    #[test]
    fn an_unchanged_status_keeps_its_transition_time() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            "Installed",
            ConditionStatus::False,
            "Failed",
            "a",
            Some(1),
        );
        let first = conditions[0].last_transition_time.clone();
        set_condition(
            &mut conditions,
            "Installed",
            ConditionStatus::False,
            "Failed",
            "b",
            Some(2),
        );
        assert_eq!(conditions[0].last_transition_time, first);
        assert_eq!(conditions[0].message, "b");
        assert_eq!(conditions[0].observed_generation, Some(2));
        assert_eq!(conditions.len(), 1);
    }

    #[test]
    fn network_noise_is_stripped() {
        assert_eq!(
            sanitize_network_error("Get \"http://x\": read tcp 127.0.0.1:5->127.0.0.1:6: connection reset"),
            "Get \"http://x\": connection reset"
        );
    }
}
