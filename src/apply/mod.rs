//! Server-side apply as the ClusterExtension's service account, the revision record, preflights.
pub mod revision;
pub mod preflight;
