//! Tests of registry+v1 loading and rendering (`olmv1::bundle::registry_v1`,
//! `olmv1::bundle::render`) and of `olmv1 render`.

mod common;
mod generators;
mod real_data;
