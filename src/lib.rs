//! olmv1: installs and upgrades cluster extensions from file-based catalogs, as OLM v1 does.
#![forbid(unsafe_code)]

pub mod admin;
pub mod apply;
pub mod bundle;
pub mod catalog;
pub mod cmd;
pub mod confined;
pub mod controller;
pub mod resolve;
pub mod version;
