//! Bundles: OCI registry client, safe unpacking, registry+v1 -> plain manifests.

pub mod cli;
pub mod csv;
pub mod image;
pub mod image_cli;
pub mod registry_v1;
pub mod render;
