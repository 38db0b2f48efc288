//! Conditions as upstream sets them: observedGeneration on each, messages cut at 32 KiB, and
//! lastTransitionTime kept while the status does not change.

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};
use olmv1_api::v1::conditions::{ConditionStatus, MAX_CONDITION_MESSAGE_LEN, TRUNCATED_MESSAGE_SUFFIX};

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

/// Sets a condition in place at `now`. An existing condition with the same status keeps its
/// lastTransitionTime, so that writing the same status again changes nothing.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
    now: Timestamp,
) {
    let status = status.as_str().to_string();
    let message = truncate_message(message);
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            if existing.status != status {
                existing.last_transition_time = Time(now);
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
            last_transition_time: Time(now),
        }),
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
    fn the_transition_time_moves_only_when_the_status_changes() {
        let (t1, t2, t3) = (
            Timestamp::from_second(1).unwrap(),
            Timestamp::from_second(2).unwrap(),
            Timestamp::from_second(3).unwrap(),
        );
        let mut conditions = Vec::new();
        let mut set = |status, reason, message: &str, generation, now| {
            set_condition(
                &mut conditions,
                "Installed",
                status,
                reason,
                message,
                Some(generation),
                now,
            );
            conditions.clone()
        };
        assert_eq!(
            set(ConditionStatus::False, "Failed", "a", 1, t1)[0].last_transition_time,
            Time(t1)
        );
        let same = set(ConditionStatus::False, "Absent", "b", 2, t2);
        assert_eq!(
            same[0].last_transition_time,
            Time(t1),
            "same status, new reason and message"
        );
        assert_eq!(
            (
                same[0].reason.as_str(),
                same[0].message.as_str(),
                same[0].observed_generation
            ),
            ("Absent", "b", Some(2))
        );
        let changed = set(ConditionStatus::True, "Succeeded", "c", 2, t3);
        assert_eq!(changed[0].last_transition_time, Time(t3));
        assert_eq!(changed.len(), 1);
    }

    #[test]
    fn network_noise_is_stripped() {
        assert_eq!(
            sanitize_network_error("Get \"http://x\": read tcp 127.0.0.1:5->127.0.0.1:6: connection reset"),
            "Get \"http://x\": connection reset"
        );
    }
}
